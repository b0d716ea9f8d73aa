"""The errors a model family raises, in a module without torch: the command lines catch them, and
a command that never loads a model (``--help``, a study's ``--dry-run``) must not import torch to
name them."""

from extract.errors import UserError


class UnknownSiteError(UserError, KeyError):
    """A site the model does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


class NonFiniteError(UserError, ValueError):
    """A hidden state contains NaN or infinity."""


class RemoteCodeError(UserError, RuntimeError):
    """Hub code that may not run (no permission, no pinned revision) or that lacks the expected modules."""


class UnsupportedTransformersError(UserError, RuntimeError):
    """The installed transformers is outside the tested range (:mod:`extract.families.transformers_support`)."""


class CheckpointError(UserError, ValueError):
    """A checkpoint the family cannot run (e.g. an architecture it does not know), found when it loads."""
