"""Figures and reports drawn from saved results, library only (nothing is recomputed here).

- ``plots``: the study's figures, PNG + PDF (``experiments.figures``, ``experiments.correlate --plot``, the demo's report)
"""
