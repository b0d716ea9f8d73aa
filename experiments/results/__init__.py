"""What experiments' results are and how they are joined, library only (``python -m experiments.collect``
and ``experiments.correlate`` are its command lines).

- ``records``: the rows of collect's CSV tables (the behaviour documents' records are ``extract.records``)
- ``inputs``: what collect reads (probe rows, behaviour documents, patch summaries), checked, and their long rows
- ``collect``: the probe x behaviour joins and the tables they make
- ``correlation``: correlation of two result columns (``experiments.correlate``)
"""
