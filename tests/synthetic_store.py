"""Stores with known structure, written directly with the store writer (no model needed)."""

from __future__ import annotations

import numpy as np

from extract.store import PartWriter


def write_store(
    folder,
    *,
    speakers_per_gender=10,
    utterances_per_speaker=10,
    dim=8,
    informative=(0, 1, 2, 3),
    strength=3.0,
    length_range=(12, 30),
    splits=True,
    seed=0,
    site="encoder.layer.0",
    pad_to=None,
    language="en",
    dataset="synthetic",
    attributes=None,
):
    """Female (class 1) utterances get ``+strength`` on dimension 0 at the ``informative`` positions,
    male ones ``-strength``; those positions also carry ``+strength`` on dimension 1 for both genders
    (a marker an attention probe can find without knowing the answer). Everything else is unit
    Gaussian noise. With ``splits``, speakers are assigned train/dev/test 6:2:2 per gender;
    otherwise the split is left empty. With ``pad_to``, every utterance is stored with ``pad_to``
    frames, as a ``--keep-padding`` Whisper store holds them: its speech frames (the same as without
    ``pad_to``), then unit Gaussian padding; its speech length is recorded as its valid frames
    (duration = length / 50 s). Every utterance is of ``language`` and ``dataset``; ``attributes``
    are added to the part's attributes (e.g. the ``config`` and ``family`` an extraction records)."""
    rng = np.random.default_rng(seed)
    padding_rng = np.random.default_rng(seed + 1)  # its own stream: the speech frames equal the unpadded store's
    folder.mkdir(parents=True, exist_ok=True)
    extra = attributes or {}
    attributes = {"model_id": "synthetic", "config": "{}", "skipped": "[]"}
    if pad_to is not None:
        attributes |= {"config": {"keep_padding": True}, "frame_rates": {site: 50.0}}
    attributes |= extra
    writer = PartWriter(folder / "part-00000.h5", {site: dim}, "float32", attributes)
    for gender in ("female", "male"):
        sign = 1.0 if gender == "female" else -1.0
        for s in range(speakers_per_gender):
            split = ("train" if s < 0.6 * speakers_per_gender else "dev" if s < 0.8 * speakers_per_gender else "test") if splits else ""
            for u in range(utterances_per_speaker):
                length = int(rng.integers(*length_range))
                states = rng.standard_normal((length, dim)).astype(np.float32)
                for position in informative:
                    if position < length:
                        states[position, 0] += sign * strength
                        states[position, 1] += strength
                if pad_to is not None:
                    states = np.concatenate([states, padding_rng.standard_normal((pad_to - length, dim)).astype(np.float32)])
                writer.add(
                    f"{gender}-{s}-{u}",
                    {site: states},
                    {"gender": gender, "speaker": f"{gender}-{s}", "language": language, "split": split, "dataset": dataset, "duration": length / 50},
                    speech_frames={site: length},
                )
    writer.close()
    return folder
