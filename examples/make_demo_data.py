"""Build ctxeval's bundled demo dataset (core/ctxeval/data/demo.jsonl) from a small corpus.

Thirty questions over a 24-document corpus, each with a reference answer, the documents a
retriever returned (ranked, by ID and text) and the documents that answer it. Some retrievals are
perfect, some miss a document, some rank it low, some return near-duplicates: enough variety for
every non-LLM metric to have something to say. Run it again after editing the corpus:

    python examples/make_demo_data.py
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = {
    "eiffel-1": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
    "eiffel-2": "The tower was designed by the company of Gustave Eiffel and completed in 1889 for the World's Fair.",
    "eiffel-3": "The Eiffel Tower is 330 metres tall and was the tallest man-made structure in the world until 1930.",
    "louvre-1": "The Louvre in Paris is the world's most-visited art museum and home of the Mona Lisa.",
    "taj-1": "The Taj Mahal is an ivory-white marble mausoleum on the right bank of the river Yamuna in Agra, India.",
    "taj-2": "It was commissioned in 1631 by the Mughal emperor Shah Jahan to house the tomb of his wife Mumtaz Mahal.",
    "taj-3": "The Taj Mahal is a UNESCO World Heritage Site and attracts millions of visitors every year.",
    "curie-1": "Marie Curie was a Polish and naturalised-French physicist and chemist who researched radioactivity.",
    "curie-2": "Marie Curie was the first woman to win a Nobel Prize, in Physics in 1903, and won the Nobel Prize in Chemistry in 1911.",
    "curie-3": "She founded the Curie Institutes in Paris and in Warsaw.",
    "turing-1": "Alan Turing was an English mathematician who formalised the concepts of algorithm and computation with the Turing machine.",
    "turing-2": "During the Second World War, Turing worked at Bletchley Park, breaking German ciphers including Enigma.",
    "turing-3": "The Turing Award, given by the Association for Computing Machinery, is named after him.",
    "lovelace-1": "Ada Lovelace wrote the first published algorithm intended for Charles Babbage's Analytical Engine in 1843.",
    "lovelace-2": "Ada Lovelace was the daughter of the poet Lord Byron.",
    "danube-1": "The Danube is Europe's second-longest river, flowing 2,850 kilometres from the Black Forest to the Black Sea.",
    "danube-2": "The Danube flows through ten countries, including Germany, Austria, Hungary and Romania, and four capital cities.",
    "everest-1": "Mount Everest, at 8,849 metres, is Earth's highest mountain above sea level, on the border of Nepal and China.",
    "everest-2": "Tenzing Norgay and Edmund Hillary made the first confirmed ascent of Mount Everest in 1953.",
    "andes-1": "The Andes is the longest continental mountain range in the world, running along the west coast of South America.",
    "python-1": "Python is a programming language created by Guido van Rossum and first released in 1991.",
    "python-2": "Python's design emphasises code readability with significant indentation.",
    "moon-1": "Apollo 11 landed on the Moon on 20 July 1969; Neil Armstrong and Buzz Aldrin walked on its surface.",
    "moon-2": "Michael Collins stayed in lunar orbit aboard the command module Columbia during Apollo 11.",
}

QUESTIONS = [
    (
        "Where is the Eiffel Tower?",
        "The Eiffel Tower is on the Champ de Mars in Paris, France.",
        ["eiffel-1"],
        ["eiffel-1", "louvre-1", "eiffel-3"],
    ),
    (
        "Who designed the Eiffel Tower and when was it completed?",
        "It was designed by Gustave Eiffel's company and completed in 1889.",
        ["eiffel-2"],
        ["eiffel-1", "eiffel-3", "eiffel-2"],
    ),
    (
        "How tall is the Eiffel Tower?",
        "The Eiffel Tower is 330 metres tall.",
        ["eiffel-3"],
        ["eiffel-3", "eiffel-1"],
    ),
    (
        "What is the Louvre known for?",
        "The Louvre in Paris is the world's most-visited art museum and holds the Mona Lisa.",
        ["louvre-1"],
        ["louvre-1"],
    ),
    (
        "Where is the Taj Mahal?",
        "The Taj Mahal is in Agra, India, on the bank of the river Yamuna.",
        ["taj-1"],
        ["taj-3", "taj-1"],
    ),
    (
        "Who commissioned the Taj Mahal, and for whom?",
        "The Mughal emperor Shah Jahan commissioned it in 1631 for the tomb of his wife Mumtaz Mahal.",
        ["taj-2"],
        ["taj-1", "taj-3"],
    ),
    (
        "Describe the Taj Mahal.",
        "The Taj Mahal is an ivory-white marble mausoleum in Agra, India, commissioned in 1631 by Shah Jahan for Mumtaz Mahal.",
        ["taj-1", "taj-2"],
        ["taj-1", "taj-2", "taj-3"],
    ),
    (
        "What did Marie Curie research?",
        "Marie Curie researched radioactivity.",
        ["curie-1"],
        ["curie-1", "curie-2"],
    ),
    (
        "Which Nobel Prizes did Marie Curie win?",
        "Marie Curie won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911.",
        ["curie-2"],
        ["curie-3", "curie-1", "curie-2"],
    ),
    (
        "What institutes did Marie Curie found?",
        "She founded the Curie Institutes in Paris and Warsaw.",
        ["curie-3"],
        ["curie-3"],
    ),
    (
        "What is Alan Turing known for?",
        "Alan Turing formalised algorithm and computation with the Turing machine.",
        ["turing-1"],
        ["turing-1", "turing-3"],
    ),
    (
        "What did Turing do during the Second World War?",
        "He worked at Bletchley Park breaking German ciphers such as Enigma.",
        ["turing-2"],
        ["turing-3", "lovelace-1", "turing-2"],
    ),
    (
        "Who gives the Turing Award?",
        "The Association for Computing Machinery gives the Turing Award.",
        ["turing-3"],
        ["turing-1", "turing-2"],
    ),
    (
        "What did Ada Lovelace write?",
        "Ada Lovelace wrote the first published algorithm for Charles Babbage's Analytical Engine in 1843.",
        ["lovelace-1"],
        ["lovelace-1", "lovelace-2"],
    ),
    (
        "Who was Ada Lovelace's father?",
        "Her father was the poet Lord Byron.",
        ["lovelace-2"],
        ["lovelace-2", "lovelace-1"],
    ),
    (
        "How long is the Danube?",
        "The Danube flows 2,850 kilometres from the Black Forest to the Black Sea.",
        ["danube-1"],
        ["danube-2", "danube-1"],
    ),
    (
        "Which countries does the Danube flow through?",
        "It flows through ten countries, including Germany, Austria, Hungary and Romania.",
        ["danube-2"],
        ["danube-2", "danube-2", "danube-1"],
    ),
    (
        "How high is Mount Everest?",
        "Mount Everest is 8,849 metres high, on the border of Nepal and China.",
        ["everest-1"],
        ["everest-1", "andes-1"],
    ),
    (
        "Who first climbed Mount Everest?",
        "Tenzing Norgay and Edmund Hillary made the first confirmed ascent in 1953.",
        ["everest-2"],
        ["everest-1", "andes-1", "everest-2"],
    ),
    (
        "What is the longest mountain range?",
        "The Andes, along the west coast of South America, is the longest continental mountain range.",
        ["andes-1"],
        ["everest-1", "everest-2"],
    ),
    (
        "Who created Python?",
        "Python was created by Guido van Rossum and first released in 1991.",
        ["python-1"],
        ["python-1", "python-2"],
    ),
    (
        "What does Python's design emphasise?",
        "Python emphasises readability, with significant indentation.",
        ["python-2"],
        ["python-2"],
    ),
    (
        "When did Apollo 11 land on the Moon?",
        "Apollo 11 landed on 20 July 1969.",
        ["moon-1"],
        ["moon-1", "moon-2"],
    ),
    (
        "Who stayed in orbit during Apollo 11?",
        "Michael Collins stayed in lunar orbit aboard Columbia.",
        ["moon-2"],
        ["moon-1", "moon-2"],
    ),
    (
        "Who walked on the Moon during Apollo 11?",
        "Neil Armstrong and Buzz Aldrin walked on the Moon.",
        ["moon-1"],
        [],
    ),
    (
        "Tell me about Apollo 11.",
        "Apollo 11 landed on 20 July 1969; Armstrong and Aldrin walked on the Moon while Michael Collins orbited in Columbia.",
        ["moon-1", "moon-2"],
        ["moon-2", "everest-2", "moon-1"],
    ),
    (
        "Tell me about Alan Turing.",
        "Alan Turing defined the Turing machine, broke Enigma at Bletchley Park, and the Turing Award is named after him.",
        ["turing-1", "turing-2", "turing-3"],
        ["turing-1", "turing-2", "turing-3"],
    ),
    (
        "Which rivers flow through Vienna?",
        "The Danube flows through Vienna, one of its four capital cities.",
        ["danube-2"],
        ["danube-1", "louvre-1", "python-2", "danube-2"],
    ),
    (
        "When was the Taj Mahal commissioned?",
        "It was commissioned in 1631.",
        ["taj-2"],
        ["taj-2", "taj-2", "taj-1"],
    ),
    ("What is the capital of Atlantis?", "There is no such place.", [], ["andes-1"]),
]


def main() -> None:
    out = Path(__file__).resolve().parents[1] / "core" / "ctxeval" / "data" / "demo.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        for number, (question, reference, relevant, retrieved) in enumerate(QUESTIONS, start=1):
            row = {
                "id": f"q{number:02d}",
                "user_input": question,
                "reference": reference,
                "retrieved_contexts": [CORPUS[d] for d in retrieved],
                "reference_contexts": [CORPUS[d] for d in relevant],
                "retrieved_context_ids": retrieved,
                "reference_context_ids": relevant,
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(QUESTIONS)} samples to {out}")


if __name__ == "__main__":
    main()
