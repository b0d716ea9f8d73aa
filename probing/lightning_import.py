"""Lightning, imported for the whole package: ``from probing.lightning_import import L``.

torchmetrics 0.10, which Lightning imports (unbabel-comet pins it below 0.11), imports setuptools'
deprecated ``pkg_resources``, and setuptools says so with a two-line UserWarning on stderr. It came
before every message of ``experiments.probe`` and ``experiments.finetune``, so that their errors were
never one line. The filter names the warning's message and the module whose import raises it, and
holds only while Lightning is imported: every other warning, and this one raised by any other
importer, is shown as before.
"""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated as an API", category=UserWarning, module=r"torchmetrics\.")
    import lightning as L

__all__ = ["L"]
