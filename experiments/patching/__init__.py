"""Activation patching between speakers (issue 32): where does the output read the speaker's gender?

- :mod:`.pairs`: which utterance's states go into which (across genders and within, the control),
  matched by text where two share one and by duration, seeded, written out for audit;
- :mod:`.scoring`: what changed in the output per pair and site (ASR: the error rate against the
  target's reference; ST: whether MuST-SHE's gendered words follow the source's gender), and the
  per-site summary with a speaker-bootstrap interval;
- :mod:`.sites`: which sites a run patches, single or joint (``A+B``: patched together in one pass);
- :mod:`.run`: the stage's options and the resumable run (``python -m experiments.patch``);
- :mod:`.figure`: the effect per site.

The hook itself is :mod:`extract.patching`.
"""
