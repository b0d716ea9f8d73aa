"""GRAFN, gender-responsive adaptive feature normalisation of raw waveforms (Alm, Szachara and
Murphy, §IV.D and §V); ``python -m experiments.grafn`` is its command line."""
