"""Scoring of model outputs, library only (the ``python -m experiments.X`` modules are its command lines).

- ``asr_metrics``: per-utterance ASR error counts under one scoring setup (``experiments.asr_gap``)
- ``gaps``: error rates per gender and their gaps, the published resampling (``experiments.asr_gap``)
- ``group_metrics``: the one group-metrics frame every per-group score goes through
- ``mustshe``: the MuST-SHE scorer (``experiments.mustshe``; the TSV format is ``extract.corpora.must_she``)
- ``translation_quality``: BLEU, chrF and COMET per gender (``experiments.st_quality``)
- ``comet_worker``: COMET's segment scores, as a script another interpreter (one with the ``[comet]`` extra) runs
- ``dataset_stats``: the corpus statistics table (``experiments.dataset_stats``)
- ``vad``: the silence filter (``experiments.vad_filter``)
- ``winomt``: WinoMT/WinoST gender accuracy, ΔG and ΔS, and the ASR side (``experiments.winomt``)
- ``word_alignment``: eflomal alignment and Pharaoh link files for the WinoMT scorer
- ``grammatical_gender``: the pluggable reader of a translated entity's grammatical gender (spaCy)
"""
