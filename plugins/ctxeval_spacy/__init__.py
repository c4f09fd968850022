"""ctxeval's spaCy plugin: named-entity and sentence extractors (the ``spacy`` extra).

Not built yet: offline ``context_entity_recall`` with spaCy arrives with the spaCy plugin issue.
This package reserves the name and imports nothing heavy.
"""
