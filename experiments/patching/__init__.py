"""Activation patching between speakers (issue 32): where does the output read the speaker's gender?
The pairs (:mod:`.pairs`), the sites (:mod:`.sites`), the scores per pair and site (:mod:`.scoring`,
:mod:`.graded`), the per-site summary (:mod:`.summary`) and its figure (:mod:`.figure`), and the
resumable run (:mod:`.run`, ``python -m experiments.patch``); the hook itself is :mod:`extract.patching`.
"""
