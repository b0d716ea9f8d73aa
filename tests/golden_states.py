"""The numeric regression guard's fixture: hidden states of the bundled Whisper base on a generated clip.

The clip is made here (a seeded, voiced-speech-like harmonic tone with a gliding pitch and formant-
like amplitude shaping, no TTS), so the fixture depends only on the weights, the converter, the
feature extractor, the model code and the hooks: exactly the path ``experiments.extract`` takes
(``ModelSpec`` -> ``load_extractor`` -> ``Extractor.extract``). A few frames spread over the clip
are kept per site, plus each site's mean over every valid frame (so a change anywhere in the clip
shows), in float32. Regenerate after a deliberate change (new weights converter, a transformers
upgrade that changes numbers) with::

    SPEECH_GENDER_CACHE=... .venv-legacy/bin/python -m tests.golden_states

(the 2025 stack, so that the test on the current one shows that both give the same numbers) and say
in the commit why the numbers moved.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "whisper-base-states.npz"
# the tiny random model of every family (hidden size 16), made under transformers 4.57 and read under
# whichever stack runs: both stacks must give the same numbers (issue 41)
TINY_FIXTURE = FIXTURE.with_name("tiny-family-states.npz")
SITES = ("encoder.layer.0", "encoder.layer.3", "encoder.final")
RATE = 16_000
SECONDS = 2.0
FRAMES_KEPT = 4  # frames per site, evenly spread over the clip's valid frames


def clip() -> np.ndarray:
    """2 s at 16 kHz: harmonics of a pitch gliding 120 -> 220 Hz under two moving 'formant' bumps,
    a syllable-rate envelope and a little seeded noise; float32 in [-1, 1]."""
    t = np.arange(int(SECONDS * RATE)) / RATE
    f0 = 120.0 + 100.0 * t / SECONDS
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    formants = (500.0 + 300.0 * np.sin(2 * np.pi * 1.5 * t), 1500.0 + 500.0 * np.cos(2 * np.pi * 0.8 * t))
    wave = np.zeros_like(t)
    for harmonic in range(1, 25):
        frequency = harmonic * f0
        gain = sum(np.exp(-(((frequency - centre) / 150.0) ** 2)) for centre in formants) + 0.05
        wave += gain * np.sin(harmonic * phase) / harmonic
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 4.0 * t)) * np.minimum(1.0, 10 * t) * np.minimum(1.0, 10 * (SECONDS - t))
    noise = np.random.default_rng(0).standard_normal(t.size)
    signal = envelope * wave + 0.01 * noise
    return (0.5 * signal / np.max(np.abs(signal))).astype(np.float32)


def states(threads: int | None = None) -> dict[str, np.ndarray]:
    """The kept frames (``SITE``) and the mean over valid frames (``SITE/mean``) of every site, the
    frame indices (``frames``), as ``experiments.extract`` computes them on the CPU in float32."""
    import torch

    from extract.spec import ModelSpec, load_extractor

    if threads is not None:
        torch.set_num_threads(threads)
    extractor = load_extractor(ModelSpec("whisper", "bundled-base", device="cpu", dtype="float32"))
    (extracted,) = extractor.extract([clip()], list(SITES))
    valid = {len(array) for array in extracted.values()}
    assert len(valid) == 1, valid
    frames = np.linspace(0, valid.pop() - 1, FRAMES_KEPT).round().astype(np.int64)
    kept: dict[str, np.ndarray] = {"frames": frames}
    for site in SITES:
        kept[site] = extracted[site][frames].astype(np.float32)
        kept[f"{site}/mean"] = extracted[site].mean(axis=0, dtype=np.float64).astype(np.float32)
    return kept


def tiny_states() -> dict[str, np.ndarray]:
    """``FAMILY/SITE`` (the kept frames) and ``FAMILY/SITE/mean`` of every site of every family's tiny
    random model on the same clip, float32 on the CPU; a site whose frames are not timed (an adapter's
    output) keeps its first frames."""
    from extract.families import FAMILY_MODULES, tiny_extractor

    kept: dict[str, np.ndarray] = {}
    for family in FAMILY_MODULES:
        extractor = tiny_extractor(family)
        (extracted,) = extractor.extract([clip()], extractor.resolve_sites("all"))
        for site, array in extracted.items():
            frames = np.linspace(0, len(array) - 1, min(FRAMES_KEPT, len(array))).round().astype(np.int64)
            kept[f"{family}/{site}"] = array[frames].astype(np.float32)
            kept[f"{family}/{site}/mean"] = array.mean(axis=0, dtype=np.float64).astype(np.float32)
    return kept


def main() -> None:
    import torch
    import transformers

    from extract.weights import CONVERTER_VERSION

    made_with = f"torch {torch.__version__}, transformers {transformers.__version__}, weights converter {CONVERTER_VERSION}"
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    for path, kept in ((FIXTURE, states()), (TINY_FIXTURE, tiny_states())):
        np.savez_compressed(path, made_with=np.array(made_with), **kept)
        print(f"wrote {path} ({path.stat().st_size} bytes; {made_with})")


if __name__ == "__main__":
    main()
