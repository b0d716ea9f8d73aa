"""A study's stages, one module each, where kin share one: :mod:`.behaviour` holds ``asr_gap``,
``mustshe`` and ``st_quality``, :mod:`.analyses` the three of Attanasio et al. 2024's section 5, and
:mod:`.reporting` ``correlate``, ``figures`` and ``report``. A module declares one
:class:`~experiments.study.context.StudyStage` per stage, which the stage table names
(``experiments.stage_table``, its records' ``study``), and says in its docstring when an output of
the stage counts as finished; :mod:`experiments.study.runner` plans and runs them in the table's order.
"""
