"""GRAFN, gender-responsive adaptive feature normalisation of raw waveforms (Alm, Szachara and
Murphy, §IV.D and §V): the transform (:mod:`.transform`), the offline calibration and spectrum
distances (:mod:`.calibration`), the filters file (:mod:`.filters`) and its application to a
manifest, with the label-free modes (:mod:`.corpus`); ``python -m experiments.grafn`` is its
command line."""
