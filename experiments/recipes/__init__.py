"""Corpus recipes: data preparation, not library (lhotse's sense of a recipe).

- ``democorpus``: the synthetic demo corpus (Kokoro and espeak-ng voices, English and Spanish, MuST-SHE en-es), built by ``experiments.demo``
"""
