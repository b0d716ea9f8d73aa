"""A store and its manifest with a second speaker attribute (``accent``) beside gender, for the
attribute probes and gaps (issue 32 item 1); written directly, no model needed."""

from __future__ import annotations

import json

import numpy as np

from extract.provenance import file_sha256
from extract.store import PartWriter

SITE = "encoder.layer.0"


def accent_speakers(classes=("north", "south", "west"), speakers_per_class=4) -> dict[str, str]:
    """Speaker -> accent; each class's speakers alternate female and male, so accent and gender are not confounded."""
    return {f"{accent}-{s}": accent for accent in classes for s in range(speakers_per_class)}


def write_attribute_corpus(
    folder, speakers: dict[str, str | None] | None = None, *, utterances=6, dim=6, strength=3.0, seed=0, attribute="accent", missing=(), label=None
):
    """``folder/manifest.jsonl`` and the store ``folder/store`` of ``speakers`` (speaker -> value of
    ``attribute``; None: the field is absent), each speaker ``utterances`` utterances of 8-16 frames.
    Class k of the sorted values gets ``+strength`` on dimension k of every frame; utterance ids in
    ``missing`` lack the field. Gender alternates per speaker (female first). The store's config
    records the manifest's path and sha256, as an extraction does, and ``label`` as the model's
    name where given. Returns (manifest, store)."""
    speakers = accent_speakers() if speakers is None else speakers
    rng = np.random.default_rng(seed)
    classes = sorted({value for value in speakers.values() if value is not None})
    folder.mkdir(parents=True, exist_ok=True)
    manifest, rows, states = folder / "manifest.jsonl", [], []
    for number, (speaker, value) in enumerate(speakers.items()):
        gender = "female" if number % 2 == 0 else "male"
        for u in range(utterances):
            uid = f"{speaker}-{u}"
            extra = {} if value is None or uid in missing else {attribute: value}
            rows.append({"id": uid, "audio": f"{uid}.wav", "language": "en", "text": "a b c", "gender": gender, "speaker": speaker, "extra": extra})
            frames = rng.standard_normal((int(rng.integers(8, 17)), dim)).astype(np.float32)
            if value is not None:
                frames[:, classes.index(value) % dim] += strength
            states.append(frames)
    manifest.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    store = folder / "store"
    store.mkdir()
    config = {"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)} | ({"label": label} if label else {})
    writer = PartWriter(store / "part-00000.h5", {SITE: dim}, "float32", {"model_id": "synthetic", "config": config, "skipped": "[]"})
    for row, frames in zip(rows, states):
        metadata = {key: row[key] for key in ("gender", "speaker", "language")} | {"split": "", "dataset": "synthetic", "duration": len(frames) / 50}
        writer.add(row["id"], {SITE: frames}, metadata, speech_frames={SITE: len(frames)})
    writer.close()
    return manifest, store
