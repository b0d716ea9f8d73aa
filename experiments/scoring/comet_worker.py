"""COMET segment scores in whichever interpreter runs this file.

    PYTHON comet_worker.py REQUEST.json SCORES.json

unbabel-comet 2.2.7 pins numpy<2, transformers<5, torchmetrics<0.11 and jsonargparse==3.13.1, so it
cannot join a current environment. ``st_quality --comet-python PYTHON`` runs this file, by its path,
in an environment that holds COMET (``make install-legacy``, or any virtualenv with
``pip install unbabel-comet``): it imports nothing of this package, only COMET and the standard
library. The request is ``{"model", "batch_size", "gpus", "devices", "segments": [{"src", "mt", "ref"}]}``;
the answer ``{"scores": [...]}``, one per segment. An error is one line on stderr and exit status 2.
In-process scoring (:func:`experiments.scoring.translation_quality.comet_scorer`) loads the model
with the same :func:`load_comet`, so both ways give the same scores.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NOT_INSTALLED = "unbabel-comet is not installed"


class CometLoadError(RuntimeError):
    """A COMET model that cannot be loaded (no local checkpoint, and the download failed)."""


def load_comet(model: str):
    """The COMET model of a local checkpoint (a ``.ckpt``, or a folder holding ``checkpoints/model.ckpt``)
    or a hub name (downloaded: needs the network)."""
    from comet import download_model, load_from_checkpoint  # here: torch and Lightning, only for COMET

    path = Path(model)
    if path.is_dir():
        path = path / "checkpoints" / "model.ckpt"
    if not path.is_file():
        try:
            path = Path(download_model(model))
        except Exception as error:  # the hub client raises several types when offline
            raise CometLoadError(f"cannot load COMET model {model!r}: not a local checkpoint and the download failed ({error})") from error
    return load_from_checkpoint(str(path))


def predict(loaded, segments: list[dict], batch_size: int, gpus: int, devices: list[int] | None) -> list[float]:
    return [float(score) for score in loaded.predict(segments, batch_size=batch_size, gpus=gpus, devices=devices, progress_bar=False).scores]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: comet_worker.py REQUEST.json SCORES.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        loaded = load_comet(request["model"])
    except ModuleNotFoundError as error:
        if error.name != "comet":
            raise
        print(f"{NOT_INSTALLED} in {sys.executable}", file=sys.stderr)
        return 2
    except CometLoadError as error:
        print(str(error), file=sys.stderr)
        return 2
    scores = predict(loaded, request["segments"], request["batch_size"], request["gpus"], request["devices"])
    Path(argv[1]).write_text(json.dumps({"scores": scores}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
