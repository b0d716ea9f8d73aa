"""The transformers releases the families are tested on, and what differs between the two majors.

Two stacks are tested (``make install`` and ``make install-legacy``): the current one (transformers
5.x) and the 2025 one that the optional COMET metric pins (4.57). :func:`check_transformers` runs
when a family module loads (:mod:`extract.families.base` imports it), so an unsupported release is
one line naming the installed and the supported versions instead of a traceback deep inside a model.

transformers 5 also draws a progress bar for every weight load, which would add lines to a one-line
error: :func:`quiet_weight_loading` turns it off where the families load models.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

from extract.families.errors import UnsupportedTransformersError

LOWEST_SUPPORTED = (4, 57)  # the oldest release the families are tested on
FIRST_UNSUPPORTED = (6, 0)  # unreleased: a major release removes what 5.x deprecates
SUPPORTED_RANGE = f">={'.'.join(map(str, LOWEST_SUPPORTED))},<{FIRST_UNSUPPORTED[0]}"


def release(text: str) -> tuple[int, int]:
    """``"5.24.0"`` -> ``(5, 24)``; ``"4.57.0.dev0"`` -> ``(4, 57)``."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise UnsupportedTransformersError(f"cannot read the installed transformers version {text!r}; supported: transformers{SUPPORTED_RANGE}")
    return int(match[1]), int(match[2])


def check_transformers(installed: str | None = None) -> str:
    """The installed transformers version (read from its metadata: transformers is not imported),
    or :class:`UnsupportedTransformersError` in one line when it is missing or outside the range."""
    if installed is None:
        try:
            installed = version("transformers")
        except PackageNotFoundError:
            raise UnsupportedTransformersError(f"transformers is not installed: pip install 'transformers{SUPPORTED_RANGE}'") from None
    if not LOWEST_SUPPORTED <= release(installed) < FIRST_UNSUPPORTED:
        raise UnsupportedTransformersError(
            f"transformers {installed} is installed; the model families support transformers{SUPPORTED_RANGE}: pip install 'transformers{SUPPORTED_RANGE}'"
        )
    return installed


def quiet_weight_loading() -> None:
    """No progress bar while weights load or save (transformers 5 draws one per load; the hub's
    download bars, which tell a user something, are huggingface_hub's and stay)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
