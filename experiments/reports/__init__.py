"""Figures and reports drawn from saved results, library only (nothing is recomputed here).

- ``plots``: the study's figures, PNG + PDF (``experiments.figures``, ``experiments.correlate --plot``, the demo's report)
- ``demo_report``: the demo's figures, correlation tables and ``report.md``, from the typed probe runs and saved results
"""
