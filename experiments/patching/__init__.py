"""Activation patching between speakers (issue 32): where does the output read the speaker's gender?

- :mod:`.pairs`: which utterance's states go into which (across genders and within, the control),
  matched by text where two share one and by duration, seeded, written out for audit;
- :mod:`.scoring`: what changed in the output per pair and site (ASR: the error rate against the
  target's reference; ST: the gender MuST-SHE's gendered words take, and the outcome: flip, lost,
  mixed, unchanged);
- :mod:`.graded`: the graded metric (the reference's log-probability; the gender margin of its
  gendered words over their other-gender forms), from teacher forcing (:mod:`extract.forced`);
- :mod:`.summary`: the per-site summary: every metric per pairing, cross minus within among pairs
  matched alike, and an interval resampling target and source speakers;
- :mod:`.sites`: which sites a run patches, single or joint (``A+B``: patched together in one pass);
- :mod:`.run`: the stage's options and the resumable run (``python -m experiments.patch``);
- :mod:`.figure`: the effect per site.

The hook itself is :mod:`extract.patching`.
"""
