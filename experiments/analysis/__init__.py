"""What explains a gap (Attanasio et al. 2024, §3 and §5): features per record and what they say.

Feature files are JSONL, one row per record keyed by ``id``, with the features under ``features``
(a number or null) and the reason for every null under ``null_reasons``.
"""
