"""Write ``tests/data/paraphrase_pairs.jsonl``: labelled (reference context, retrieved chunk)
pairs for calibrating the matchers of the non-LLM context metrics.

Every pair says whether the chunk states the facts of the reference context (``label`` 1) or
not (0). The set is built from hand-written items, one per fact, on varied topics (history,
science, products, medicine, law, geography, software, finance, ...). Each item holds:

- ``reference``: a reference context of 1-3 sentences;
- ``positive``: the same facts in other words, with its kind: ``paraphrase`` (reworded),
  ``reordering`` (the same clauses in another order, partly reworded) or ``summary`` (shorter,
  every key fact kept);
- ``hard_negative``: the reference's wording with the key fact or entity changed (another
  year, dose, place, person, version...);
- ``other_fact``: a different fact about the same topic.

From each item the script makes six pairs, three of each label:

=======================  =====  ==============================================================
kind                     label  chunk
=======================  =====  ==============================================================
paraphrase / reordering    1    the item's ``positive``
/ summary
``embedded``               1    the reference verbatim inside a longer chunk: a boilerplate
                                line before it and the item's other fact after it
``embedded_paraphrase``    1    the positive inside a longer chunk, after a boilerplate line
``hard_negative``          0    the item's ``hard_negative``
``same_topic``             0    the item's ``other_fact``
``unrelated``              0    (even items) another item's reference, on another topic
``boilerplate_negative``   0    (odd items) the hard negative inside the same kind of longer
                                chunk as ``embedded``: boilerplate before, other fact after
=======================  =====  ==============================================================

The boilerplate lines and the "other" item are drawn with a seeded ``random.Random``, so the
output is the same on every run. Run from the repository root:

    .venv/bin/python bench/make_paraphrase_set.py            # writes tests/data/...
    .venv/bin/python bench/make_paraphrase_set.py --check    # fails if the file differs
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "paraphrase_pairs.jsonl"
SEED = 36

# Lines a chunker carries along with a passage: headings, navigation, notes.
BOILERPLATE = [
    "Overview.",
    "Background and key facts.",
    "This article is part of our knowledge base. Last reviewed in 2023.",
    "Section 2. Details.",
    "Summary of the main points:",
    "From the reference guide (revised edition).",
    "Frequently asked questions.",
    "Note: the information below is provided for general reference only.",
    "See also the related articles in this collection.",
    "Chapter 4 - Essentials.",
    "Key points at a glance.",
    "Contents: introduction, facts, further reading.",
]

# (topic, reference, (positive kind, positive), hard negative, other fact on the topic)
ITEMS: list[tuple[str, str, tuple[str, str], str, str]] = [
    (
        "history",
        "The Berlin Wall fell on 9 November 1989, after East German authorities opened the "
        "border crossings.",
        (
            "paraphrase",
            "East Germany opened its border checkpoints, and on November 9, 1989 "
            "the Berlin Wall came down.",
        ),
        "The Berlin Wall fell on 9 November 1991, after West German authorities closed the "
        "border crossings.",
        "The Berlin Wall was built in August 1961 to stop emigration from East to West Berlin.",
    ),
    (
        "history",
        "The Magna Carta was sealed by King John of England at Runnymede in 1215. It limited "
        "the power of the king.",
        ("summary", "In 1215 King John sealed the Magna Carta at Runnymede, curbing royal power."),
        "The Magna Carta was sealed by King Henry of England at Windsor in 1297. It expanded "
        "the power of the king.",
        "Only three clauses of the Magna Carta remain part of English law today.",
    ),
    (
        "history",
        "The Roman Emperor Augustus ruled from 27 BC until his death in AD 14.",
        ("paraphrase", "Augustus was emperor of Rome from 27 BC to AD 14, when he died."),
        "The Roman Emperor Tiberius ruled from AD 14 until his death in AD 37.",
        "Augustus was born Gaius Octavius and was the adopted son of Julius Caesar.",
    ),
    (
        "history",
        "The first transatlantic telegraph cable was completed in 1858, but it failed after "
        "about three weeks.",
        (
            "reordering",
            "After only about three weeks in service, the first telegraph cable "
            "across the Atlantic, finished in 1858, stopped working.",
        ),
        "The first transatlantic telephone cable was completed in 1956, and it worked for "
        "more than twenty years.",
        "A durable transatlantic telegraph link was established in 1866 by the Great Eastern.",
    ),
    (
        "history",
        "The printing press with movable type was developed by Johannes Gutenberg in Mainz "
        "around 1440.",
        (
            "paraphrase",
            "Around 1440, in the city of Mainz, Johannes Gutenberg created a "
            "printing press that used movable type.",
        ),
        "The printing press with movable type was developed by William Caxton in London "
        "around 1476.",
        "The Gutenberg Bible, printed in the 1450s, was the first major book printed in Europe "
        "with metal type.",
    ),
    (
        "history",
        "The Treaty of Westphalia, signed in 1648, ended the Thirty Years' War in the Holy "
        "Roman Empire.",
        (
            "paraphrase",
            "The Thirty Years' War came to an end with the Peace of Westphalia, concluded in 1648.",
        ),
        "The Treaty of Utrecht, signed in 1713, ended the War of the Spanish Succession in Europe.",
        "The Thirty Years' War began in 1618 with the Defenestration of Prague.",
    ),
    (
        "science",
        "Water boils at 100 degrees Celsius at sea level. At higher altitudes the boiling "
        "point is lower because air pressure is lower.",
        (
            "reordering",
            "Because the air pressure drops with altitude, water boils below 100 "
            "degrees Celsius in the mountains, while at sea level it boils at 100.",
        ),
        "Water freezes at 0 degrees Celsius at sea level. At higher altitudes the freezing "
        "point is almost unchanged because ice is barely affected by pressure.",
        "Water has its highest density at about 4 degrees Celsius.",
    ),
    (
        "science",
        "Photosynthesis converts carbon dioxide and water into glucose and oxygen, using the "
        "energy of sunlight captured by chlorophyll.",
        (
            "paraphrase",
            "Using light energy absorbed by chlorophyll, plants turn water and CO2 "
            "into sugar, releasing oxygen.",
        ),
        "Cellular respiration converts glucose and oxygen into carbon dioxide and water, "
        "releasing energy stored as ATP.",
        "Chlorophyll absorbs mostly blue and red light and reflects green light.",
    ),
    (
        "science",
        "The speed of light in a vacuum is exactly 299,792,458 metres per second.",
        ("paraphrase", "In vacuum, light travels at precisely 299,792,458 m/s."),
        "The speed of sound in dry air at 20 degrees Celsius is about 343 metres per second.",
        "Since 1983 the metre has been defined through the distance light travels in a "
        "vacuum in a fraction of a second.",
    ),
    (
        "science",
        "DNA is a double helix made of two strands held together by hydrogen bonds between "
        "base pairs. Its structure was described by Watson and Crick in 1953.",
        (
            "summary",
            "Watson and Crick showed in 1953 that DNA is a double helix of two strands "
            "joined by hydrogen-bonded base pairs.",
        ),
        "RNA is a single strand made of nucleotides that fold through hydrogen bonds between "
        "base pairs. Its role in protein synthesis was described in the 1960s.",
        "Rosalind Franklin's X-ray diffraction images provided key evidence for the structure "
        "of DNA.",
    ),
    (
        "science",
        "Mount Everest is 8,849 metres tall according to the 2020 survey by China and Nepal.",
        (
            "paraphrase",
            "A joint Chinese-Nepali survey in 2020 put the height of Everest at 8,849 m.",
        ),
        "K2 is 8,611 metres tall according to the survey by the Survey of Pakistan.",
        "Mount Everest was first climbed by Edmund Hillary and Tenzing Norgay in 1953.",
    ),
    (
        "science",
        "Helium is the second lightest element. It has the atomic number 2 and is a noble gas.",
        (
            "reordering",
            "With atomic number 2, the noble gas helium is the second-lightest element.",
        ),
        "Lithium is the third lightest element. It has the atomic number 3 and is an alkali metal.",
        "Most of the helium used on Earth is extracted from natural gas fields.",
    ),
    (
        "astronomy",
        "Jupiter is the largest planet in the Solar System, with a mass more than twice that "
        "of all the other planets combined.",
        (
            "paraphrase",
            "No planet in our Solar System is bigger than Jupiter; it is over two "
            "times as massive as every other planet put together.",
        ),
        "Saturn is the second largest planet in the Solar System, with a mass less than a "
        "third of Jupiter's.",
        "Jupiter's Great Red Spot is a storm that has been observed for more than 300 years.",
    ),
    (
        "astronomy",
        "The Moon takes about 27.3 days to orbit the Earth, the same time it takes to rotate "
        "once on its axis, so the same side always faces us.",
        (
            "summary",
            "Because the Moon rotates once in the 27.3 days of its orbit, we always "
            "see the same face.",
        ),
        "Mars takes about 687 days to orbit the Sun, while it takes about 24.6 hours to rotate "
        "once on its axis.",
        "The Moon is slowly moving away from the Earth, by about 3.8 centimetres per year.",
    ),
    (
        "astronomy",
        "The Hubble Space Telescope was launched in April 1990 aboard the Space Shuttle Discovery.",
        (
            "paraphrase",
            "Space Shuttle Discovery carried the Hubble telescope into orbit in April 1990.",
        ),
        "The James Webb Space Telescope was launched in December 2021 aboard an Ariane 5 rocket.",
        "A flaw in Hubble's main mirror was corrected by astronauts during a servicing "
        "mission in 1993.",
    ),
    (
        "medicine",
        "The usual adult dose of paracetamol is 500 mg to 1 g every four to six hours, with no "
        "more than 4 g in 24 hours.",
        (
            "paraphrase",
            "Adults typically take 0.5-1 g of paracetamol every 4-6 hours and "
            "should not exceed 4 grams a day.",
        ),
        "The usual adult dose of ibuprofen is 200 mg to 400 mg every four to six hours, with "
        "no more than 1.2 g in 24 hours without a prescription.",
        "Paracetamol overdose can cause severe liver damage.",
    ),
    (
        "medicine",
        "Type 1 diabetes is an autoimmune disease in which the immune system destroys the "
        "insulin-producing beta cells of the pancreas.",
        (
            "paraphrase",
            "In type 1 diabetes the body's own immune system attacks and destroys "
            "the pancreatic beta cells that make insulin.",
        ),
        "Type 2 diabetes is a metabolic disease in which the body becomes resistant to insulin "
        "and the pancreas cannot compensate.",
        "People with type 1 diabetes need insulin injections or an insulin pump.",
    ),
    (
        "medicine",
        "Measles is spread through the air by coughing and sneezing. Two doses of the MMR "
        "vaccine are about 97% effective at preventing it.",
        (
            "reordering",
            "The MMR vaccine, given in two doses, prevents about 97% of measles "
            "cases; the disease itself travels through the air when infected people cough or "
            "sneeze.",
        ),
        "Tetanus is not spread from person to person. Three doses of the DTaP vaccine are "
        "needed for full protection in children.",
        "Measles causes a characteristic rash that usually starts on the face.",
    ),
    (
        "medicine",
        "Penicillin was discovered by Alexander Fleming in 1928 when he noticed that a mould "
        "killed the bacteria around it.",
        (
            "paraphrase",
            "In 1928 Alexander Fleming saw that a mould stopped bacteria from "
            "growing near it, which led to the discovery of penicillin.",
        ),
        "Streptomycin was discovered by Selman Waksman's laboratory in 1943 from a soil bacterium.",
        "Penicillin was first mass-produced during the Second World War.",
    ),
    (
        "medicine",
        "A normal resting heart rate for adults ranges from 60 to 100 beats per minute.",
        (
            "paraphrase",
            "For an adult at rest, between 60 and 100 heartbeats a minute is considered normal.",
        ),
        "A normal resting breathing rate for adults ranges from 12 to 20 breaths per minute.",
        "Well-trained athletes can have a resting heart rate below 60 beats per minute.",
    ),
    (
        "medicine",
        "Vitamin D is produced in the skin when it is exposed to ultraviolet B light from the "
        "sun. It helps the body absorb calcium.",
        (
            "summary",
            "Skin makes vitamin D under the sun's UVB rays, and the vitamin aids "
            "calcium absorption.",
        ),
        "Vitamin C is not produced by the human body and must come from food. It helps the "
        "body absorb iron.",
        "Severe vitamin D deficiency in children can cause rickets.",
    ),
    (
        "law",
        "Under the GDPR, a data breach must be reported to the supervisory authority within 72 "
        "hours of becoming aware of it.",
        (
            "paraphrase",
            "The GDPR requires organisations to notify the supervisory authority of "
            "a personal data breach no later than 72 hours after they learn of it.",
        ),
        "Under the GDPR, a data subject access request must be answered within one month of "
        "receiving it.",
        "Fines under the GDPR can reach 20 million euros or 4% of annual worldwide turnover.",
    ),
    (
        "law",
        "In the United States, a federal copyright for works created after 1978 lasts for the "
        "life of the author plus 70 years.",
        (
            "paraphrase",
            "U.S. copyright on works made since 1978 runs for 70 years after the author's death.",
        ),
        "In the United States, a utility patent lasts for 20 years from the date the "
        "application was filed.",
        "Works published in the United States before 1929 are now in the public domain.",
    ),
    (
        "law",
        "The Fifth Amendment to the U.S. Constitution protects a person from being compelled "
        "to testify against themselves in a criminal case.",
        (
            "paraphrase",
            "Under the Fifth Amendment, nobody can be forced to be a witness "
            "against himself in a criminal trial.",
        ),
        "The Sixth Amendment to the U.S. Constitution guarantees a person the right to a "
        "speedy and public trial in a criminal case.",
        "The Fifth Amendment also protects against double jeopardy.",
    ),
    (
        "law",
        "A tenant in England must usually be given at least two months' notice under a "
        "section 21 eviction notice.",
        (
            "paraphrase",
            "Section 21 notices in England generally have to give the tenant a "
            "minimum of two months to leave.",
        ),
        "A tenant in England must usually give at least one month's notice to end a periodic "
        "tenancy.",
        "Landlords in England must protect a tenant's deposit in a government-approved scheme.",
    ),
    (
        "law",
        "The statute of limitations for most breach of contract claims in England and Wales is "
        "six years from the date of the breach.",
        (
            "paraphrase",
            "In England and Wales you generally have six years after a contract is "
            "breached to bring a claim.",
        ),
        "The statute of limitations for most personal injury claims in England and Wales is "
        "three years from the date of the injury.",
        "Contracts executed as a deed in England and Wales have a limitation period of twelve "
        "years.",
    ),
    (
        "geography",
        "The Nile is about 6,650 kilometres long and flows north through eleven countries "
        "before reaching the Mediterranean Sea.",
        (
            "reordering",
            "Flowing northwards across eleven countries into the Mediterranean, the "
            "Nile stretches roughly 6,650 km.",
        ),
        "The Amazon is about 6,400 kilometres long and flows east through seven countries "
        "before reaching the Atlantic Ocean.",
        "The Aswan High Dam on the Nile was completed in 1970.",
    ),
    (
        "geography",
        "Canberra is the capital of Australia. It was chosen as a compromise between Sydney "
        "and Melbourne.",
        (
            "paraphrase",
            "As a compromise between rivals Sydney and Melbourne, Canberra was "
            "selected to be Australia's capital.",
        ),
        "Wellington is the capital of New Zealand. It replaced Auckland as the capital in 1865.",
        "Sydney is the most populous city in Australia.",
    ),
    (
        "geography",
        "Lake Baikal in Siberia is the deepest lake in the world, reaching 1,642 metres.",
        (
            "paraphrase",
            "At 1,642 m at its deepest point, Siberia's Lake Baikal is the world's deepest lake.",
        ),
        "Lake Superior in North America is the largest freshwater lake in the world by "
        "surface area.",
        "Lake Baikal holds about 20% of the world's unfrozen surface fresh water.",
    ),
    (
        "geography",
        "Iceland lies on the Mid-Atlantic Ridge, where the North American and Eurasian plates "
        "move apart, which is why it has many volcanoes.",
        (
            "summary",
            "Iceland's many volcanoes come from its position on the Mid-Atlantic "
            "Ridge, where two plates are pulling apart.",
        ),
        "Japan lies where the Pacific plate moves under the Eurasian plate, which is why it "
        "has many earthquakes.",
        "Reykjavik is the northernmost capital of a sovereign state.",
    ),
    (
        "geography",
        "The Sahara is the largest hot desert in the world, covering about 9.2 million square "
        "kilometres of North Africa.",
        (
            "paraphrase",
            "Spanning roughly 9.2 million km2 across northern Africa, the Sahara is "
            "the biggest hot desert on Earth.",
        ),
        "The Gobi is the largest desert in Asia, covering about 1.3 million square kilometres "
        "of China and Mongolia.",
        "Parts of the Sahara were green grasslands about 6,000 years ago.",
    ),
    (
        "software",
        "Python 3.12 was released in October 2023. It improved error messages and made "
        "f-string parsing more flexible.",
        (
            "reordering",
            "Better error messages and more flexible f-string parsing arrived with "
            "Python 3.12, released in October 2023.",
        ),
        "Python 3.11 was released in October 2022. It made the interpreter faster and added "
        "exception groups.",
        "Python 2 reached its end of life on 1 January 2020.",
    ),
    (
        "software",
        "To undo the last commit but keep its changes in the working tree, run git reset "
        "--soft HEAD~1.",
        (
            "paraphrase",
            "Running git reset --soft HEAD~1 removes the most recent commit while "
            "leaving its changes in place, staged.",
        ),
        "To discard the last commit and all of its changes, run git reset --hard HEAD~1.",
        "git revert creates a new commit that undoes the changes of an earlier commit.",
    ),
    (
        "software",
        "PostgreSQL uses multiversion concurrency control, so readers never block writers and "
        "writers never block readers.",
        (
            "paraphrase",
            "Thanks to MVCC, in PostgreSQL reading a row does not wait for writes "
            "and writes do not wait for reads.",
        ),
        "SQLite uses a single writer lock, so only one connection can write to the database "
        "at a time.",
        "PostgreSQL's VACUUM command reclaims the storage taken by dead row versions.",
    ),
    (
        "software",
        "In Kubernetes, a Deployment manages a ReplicaSet to keep a set number of identical "
        "pods running and supports rolling updates.",
        (
            "summary",
            "A Kubernetes Deployment keeps the desired count of identical pods running "
            "through a ReplicaSet and can roll out updates gradually.",
        ),
        "In Kubernetes, a StatefulSet manages pods that need stable network identities and "
        "persistent storage.",
        "Kubernetes was originally designed by Google and released in 2014.",
    ),
    (
        "software",
        "The HTTP status code 404 means that the server cannot find the requested resource.",
        (
            "paraphrase",
            "A 404 response tells the client that the resource it asked for was not "
            "found on the server.",
        ),
        "The HTTP status code 403 means that the server understood the request but refuses to "
        "authorize it.",
        "HTTP status codes in the 500 range indicate server errors.",
    ),
    (
        "software",
        "The API rate limit is 100 requests per minute per API key. Requests over the limit "
        "receive HTTP 429.",
        (
            "reordering",
            "Each API key may send up to 100 requests a minute; any request beyond "
            "that gets a 429 response.",
        ),
        "The API rate limit is 1,000 requests per hour per IP address. Requests over the limit "
        "are queued.",
        "API keys can be created and revoked in the account settings page.",
    ),
    (
        "products",
        "The Model X vacuum cleaner has a battery that lasts up to 60 minutes and recharges "
        "fully in 3.5 hours.",
        (
            "paraphrase",
            "A full charge of the Model X vacuum takes three and a half hours and "
            "gives up to an hour of cleaning.",
        ),
        "The Model Y vacuum cleaner has a battery that lasts up to 40 minutes and recharges "
        "fully in 5 hours.",
        "The Model X vacuum cleaner comes with a HEPA filter that can be washed under the tap.",
    ),
    (
        "products",
        "The AquaPro 2 water bottle keeps drinks cold for 24 hours and hot for 12 hours. It "
        "holds 750 ml.",
        ("summary", "The 750 ml AquaPro 2 bottle keeps drinks cold a day and hot half a day."),
        "The AquaPro Mini water bottle keeps drinks cold for 12 hours and hot for 6 hours. It "
        "holds 350 ml.",
        "The AquaPro 2 water bottle is dishwasher safe except for its lid.",
    ),
    (
        "products",
        "Orders over 50 euros ship free within the EU. Delivery takes three to five business days.",
        (
            "reordering",
            "Within the EU, delivery takes 3-5 working days, and shipping costs "
            "nothing on orders above 50 euros.",
        ),
        "Orders over 100 euros ship free outside the EU. Delivery takes ten to fifteen business "
        "days.",
        "Items can be returned within 30 days of delivery for a full refund.",
    ),
    (
        "products",
        "The SoundBar 500 supports Dolby Atmos and connects to the TV through HDMI eARC.",
        (
            "paraphrase",
            "Hook the SoundBar 500 up to your television via HDMI eARC; it handles "
            "Dolby Atmos audio.",
        ),
        "The SoundBar 300 does not support Dolby Atmos and connects to the TV through an "
        "optical cable.",
        "The SoundBar 500 comes with a wireless subwoofer.",
    ),
    (
        "products",
        "The warranty covers manufacturing defects for two years from the date of purchase. "
        "It does not cover accidental damage.",
        (
            "paraphrase",
            "Defects in manufacturing are covered for 24 months after you buy the "
            "product, but accidental damage is excluded.",
        ),
        "The extended warranty covers accidental damage for three years from the date of "
        "purchase. It does not cover theft.",
        "To make a warranty claim, contact support with your order number.",
    ),
    (
        "finance",
        "A Roth IRA is funded with after-tax money, and qualified withdrawals in retirement are "
        "tax-free.",
        (
            "paraphrase",
            "You pay tax before contributing to a Roth IRA, so eligible withdrawals "
            "after retirement are not taxed.",
        ),
        "A traditional IRA is funded with pre-tax money, and withdrawals in retirement are "
        "taxed as income.",
        "The annual contribution limit for IRAs was 7,000 dollars in 2024.",
    ),
    (
        "finance",
        "The European Central Bank raised its main refinancing rate to 4.5% in September 2023.",
        (
            "paraphrase",
            "In September 2023 the ECB lifted its main refinancing rate to 4.5 percent.",
        ),
        "The Bank of England raised its bank rate to 5.25% in August 2023.",
        "The European Central Bank is headquartered in Frankfurt.",
    ),
    (
        "finance",
        "Compound interest is calculated on the initial principal and on the interest "
        "accumulated in earlier periods.",
        (
            "paraphrase",
            "With compound interest, you earn interest not only on the original "
            "amount but also on the interest already added.",
        ),
        "Simple interest is calculated only on the initial principal, never on the interest "
        "earned in earlier periods.",
        "The rule of 72 estimates how many years it takes for an investment to double.",
    ),
    (
        "biology",
        "Honey bees communicate the location of food to other bees through a waggle dance.",
        ("paraphrase", "To tell their hive-mates where food is, honeybees perform a waggle dance."),
        "Ants communicate the location of food to other ants through pheromone trails.",
        "A honey bee colony has a single queen that lays all the eggs.",
    ),
    (
        "biology",
        "The blue whale is the largest animal known to have ever lived, growing up to about "
        "30 metres long.",
        (
            "paraphrase",
            "Reaching lengths near 30 m, the blue whale is the biggest animal that "
            "has ever existed, as far as we know.",
        ),
        "The whale shark is the largest living fish, growing up to about 18 metres long.",
        "Blue whales feed almost exclusively on krill.",
    ),
    (
        "biology",
        "Mitochondria produce most of the cell's ATP through oxidative phosphorylation. They "
        "have their own DNA, inherited from the mother.",
        (
            "reordering",
            "Inherited through the mother and carrying their own DNA, mitochondria "
            "make most of a cell's ATP by oxidative phosphorylation.",
        ),
        "Chloroplasts produce the cell's sugars through photosynthesis. They have their own "
        "DNA, inherited from the father in some conifers.",
        "Red blood cells in mammals have no mitochondria.",
    ),
    (
        "music",
        "Ludwig van Beethoven completed his Ninth Symphony in 1824, when he was almost "
        "completely deaf.",
        (
            "paraphrase",
            "Though nearly totally deaf by then, Beethoven finished his Symphony No. 9 in 1824.",
        ),
        "Wolfgang Amadeus Mozart completed his Jupiter Symphony in 1788, three years before "
        "his death.",
        "The final movement of Beethoven's Ninth sets Schiller's Ode to Joy.",
    ),
    (
        "literature",
        "Mary Shelley published Frankenstein in 1818. She began writing it during a stay near "
        "Lake Geneva in 1816.",
        (
            "summary",
            "Frankenstein, begun by Mary Shelley by Lake Geneva in 1816, came out in 1818.",
        ),
        "Bram Stoker published Dracula in 1897. He began writing it after a stay in Whitby in "
        "1890.",
        "Frankenstein is often called the first science fiction novel.",
    ),
    (
        "sports",
        "The marathon distance was fixed at 42.195 kilometres in 1921, based on the course of "
        "the 1908 London Olympics.",
        (
            "paraphrase",
            "Since 1921 a marathon has officially been 42.195 km, the length run at "
            "the London Olympic Games of 1908.",
        ),
        "The half marathon distance is 21.0975 kilometres, exactly half of the full marathon.",
        "Eliud Kipchoge ran a marathon in under two hours in an unofficial event in 2019.",
    ),
    (
        "sports",
        "A football match lasts 90 minutes, divided into two halves of 45 minutes, plus "
        "stoppage time.",
        (
            "paraphrase",
            "Football games are played over two 45-minute halves, 90 minutes in "
            "total, with added time for stoppages.",
        ),
        "A basketball game in the NBA lasts 48 minutes, divided into four quarters of 12 minutes.",
        "A football team has eleven players on the pitch, including the goalkeeper.",
    ),
    (
        "cooking",
        "Bread dough should be left to rise until it has doubled in size, which usually takes "
        "one to two hours at room temperature.",
        (
            "paraphrase",
            "Let the dough prove at room temperature for about 1-2 hours, until it "
            "is twice as big.",
        ),
        "Pizza dough should be left to rest in the fridge for 24 to 72 hours to develop flavour.",
        "Salt slows down the activity of yeast in bread dough.",
    ),
    (
        "hr_policy",
        "Employees are entitled to 25 days of paid annual leave, plus public holidays. Unused "
        "days can be carried over until 31 March.",
        (
            "reordering",
            "Leave not taken can be carried into the next year until the end of "
            "March; every employee gets 25 paid vacation days on top of public holidays.",
        ),
        "Employees are entitled to 10 days of paid sick leave per year. Unused days cannot be "
        "carried over.",
        "Parental leave requests must be submitted to HR at least eight weeks in advance.",
    ),
    (
        "travel",
        "Citizens of the EU can travel to Norway with a valid national identity card; no "
        "passport is required.",
        (
            "paraphrase",
            "A valid ID card is enough for EU nationals visiting Norway, they do "
            "not need a passport.",
        ),
        "Citizens of the EU need a valid passport to travel to the United Kingdom; identity "
        "cards are no longer accepted.",
        "Norway is not a member of the EU but is part of the Schengen Area.",
    ),
]


def _chunk(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def make_pairs(seed: int = SEED) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for index, (topic, reference, (kind, positive), hard, other) in enumerate(ITEMS):
        head, tail = rng.sample(BOILERPLATE, 2)
        others = [j for j, item in enumerate(ITEMS) if item[0] != topic]
        unrelated = ITEMS[rng.choice(others)][1]
        pairs: list[tuple[str, int, str]] = [
            (kind, 1, positive),
            ("embedded", 1, _chunk(head, reference, other)),
            ("embedded_paraphrase", 1, _chunk(tail, positive)),
            ("hard_negative", 0, hard),
            ("same_topic", 0, other),
        ]
        if index % 2 == 0:
            pairs.append(("unrelated", 0, unrelated))
        else:
            pairs.append(("boilerplate_negative", 0, _chunk(head, hard, other)))
        for number, (pair_kind, label, chunk) in enumerate(pairs):
            rows.append(
                {
                    "id": f"{topic}-{index:02d}-{number}",
                    "reference": reference,
                    "chunk": chunk,
                    "label": label,
                    "kind": pair_kind,
                    "topic": topic,
                }
            )
    return rows


def render(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="fail if the file differs")
    args = parser.parse_args()
    text = render(make_pairs())
    if args.check:
        if args.out.read_text(encoding="utf-8") != text:
            sys.exit(f"{args.out} differs from what {Path(__file__).name} writes")
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    rows = make_pairs()
    positives = sum(1 for row in rows if row["label"] == 1)
    print(f"{args.out}: {len(rows)} pairs, {positives} positive, {len(rows) - positives} negative")


if __name__ == "__main__":
    main()
