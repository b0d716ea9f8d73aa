"""Corpus recipes: data preparation, not library (lhotse's sense of a recipe).

- ``democorpus``: the synthetic demo corpus (Kokoro and espeak-ng voices, English and Spanish, MuST-SHE en-es), built by ``experiments.demo``
- ``realvoices``: real, credited voices from Debian packages (asterisk prompts, Tux Paint descriptions), 10 languages, with a card of licences and credits
"""
