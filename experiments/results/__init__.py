"""Experiments' results, library only: their records (``records``), what collect reads (``inputs``), the
probe x behaviour joins (``collect``) and the correlation of two result columns (``correlation``)."""
