"""A study's stages, a module each (kin share one: :mod:`.behaviour`, :mod:`.analyses`, :mod:`.reporting`),
named by the stage table (``experiments.stage_table``, a record's ``study``). A module declares a
:class:`~experiments.study.context.StudyStage` per stage, named after it in capitals, and says in its
docstring when an output of the stage counts as finished."""
