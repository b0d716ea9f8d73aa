"""What explains a gap (Attanasio et al. 2024, §3 and §5): features per record and what they say.

- :mod:`.acoustic`: mean F0, mean intensity and speaking rate per record (Praat through parselmouth);
- :mod:`.lexical`: universal POS counts, named entities and lexical density per record (spaCy);
- :mod:`.contrasts`: female/male contrasts of every feature, the per-setup table that
  ``experiments.correlate`` correlates with the gap E, and a per-utterance error regression;
- :mod:`.speakers`: speaker ids by clustering embeddings with HDBSCAN (for Fleurs, which has none);
- :mod:`.f0`: F0 statistics per record written as a store, the F0-only baseline of the gender probes.

Feature files are JSONL, one row per record keyed by ``id``, with the features under ``features``
(a number or null) and the reason for every null under ``null_reasons``.
"""
