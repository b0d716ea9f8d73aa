"""The figure library: figures drawn from saved results, library only (nothing is recomputed here).

- ``plots``: the study's figures, PNG + PDF (``experiments.figures``, ``experiments.correlate --plot``,
  the study's report and the demo's report, ``experiments.demo.report``)
- ``markdown``: the jinja2 settings of the Markdown reports rendered from templates (the demo's report
  and its opt-in sections, the two corpus cards)

It imports neither ``experiments.study`` nor ``experiments.demo``, which both import it
(tests/experiments/test_import_graph.py checks it).
"""
