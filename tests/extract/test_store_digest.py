"""The sites' data digests (issue 34): new parts record xxh3_128 digests (``data_digest``) under one
sha256 content checksum; parts written before, with sha256 digests and no ``data_digest``, read and
verify exactly as before; an algorithm this version does not know is refused in one line."""

import gzip
import hashlib
import shutil

import h5py
import numpy as np
import pytest
import xxhash

from extract import __version__
from extract.interventions import store_content_hash
from extract.stage_options import ExtractOptions
from extract.store import PartWriter, StoreError, content_checksum, part_attributes, recorded_checksum, writer
from tests.paths import FIXTURES

SITES = {"b.site": 5, "a.site": 3}  # not in name order: the checksum takes the sites sorted
OLD_PART = "shard0000of0001-part00000.h5"
# Computed by the writer before xxh3_128 (commit b0ebe4b) from tests/fixtures/store-1c09a90.h5.gz:
OLD_CONTENT_SHA256 = "c764392021fcf2d0d0be62984f869be45acb76eb5c075d57bb6b585865134e6b"
OLD_STORE_HASH = "195d8857892188ed182fcec701761dbf5f2a97eff080abbcb1ac68faea340a57"  # extract.interventions.store_content_hash


def _arrays():
    """Hand-made states: utterance u0 with 4 frames, u1 with 1, u2 with 7 (float16 holds these exactly)."""
    return [
        {
            site: (np.arange(frames * dim, dtype=np.float32).reshape(frames, dim) / 8 + number).astype(np.float16)
            for number, (site, dim) in enumerate(SITES.items())
        }
        for frames in (4, 1, 7)
    ]


LABELS = [
    {"gender": "female", "speaker": "s0", "language": "en", "split": "train", "dataset": "cv", "duration": 1.5},
    {"gender": "male", "speaker": "s1", "language": "en", "split": "test", "dataset": "cv", "duration": 0.25},
    {"gender": "female", "speaker": "s0", "language": "it", "split": "dev", "dataset": "cv", "duration": 2.0},
]


def _write(path, **options):
    with PartWriter(path, SITES, "float16", {}, **options) as writer:
        for index, states in enumerate(_arrays()):
            writer.add(f"u{index}", states, LABELS[index], speech_frames={"a.site": len(states["a.site"]) - 1})
    return path


def _expected(site_digest) -> str:
    """The content checksum by its definition (format 2), written out: one sha256 over each site (sorted)
    with its data digest, its offsets and speech frames (int64), the ids joined by newlines, then
    each label column (NUL, name, NUL, the column as a JSON list) and the durations (float64)."""
    arrays = _arrays()
    total = hashlib.sha256()
    for site in sorted(SITES):
        data = b"".join(states[site].tobytes() for states in arrays)
        offsets = np.cumsum([0] + [len(states[site]) for states in arrays]).astype(np.int64)
        speech = np.array([len(states[site]) - (site == "a.site") for states in arrays], dtype=np.int64)
        total.update(site.encode() + b"\0" + site_digest(data).encode())
        total.update(offsets.tobytes() + speech.tobytes())
    total.update(b"u0\nu1\nu2")
    for name in ("gender", "speaker", "language", "split", "dataset"):
        total.update(b"\0" + name.encode() + b"\0" + ('["' + '", "'.join(row[name] for row in LABELS) + '"]').encode())
    total.update(b"\0duration\0" + np.array([1.5, 0.25, 2.0], dtype=np.float64).tobytes())
    return total.hexdigest()


@pytest.mark.parametrize("flush_bytes", [0, writer.FLUSH_BYTES])
def test_the_recorded_checksum_is_one_sha256_over_the_index_and_the_sites_xxh3_128_digests(tmp_path, flush_bytes):
    path = _write(tmp_path / "p.h5", flush_bytes=flush_bytes)
    expected = _expected(lambda data: xxhash.xxh3_128(data).hexdigest())
    with h5py.File(path) as handle:
        assert handle.attrs["data_digest"] == "xxh3_128"
        assert handle.attrs["content_sha256"] == expected == content_checksum(handle)
    assert recorded_checksum(path) == recorded_checksum(path, recompute=True) == expected
    assert part_attributes(path).extra == {}  # the writer's own attribute, not part of the record


def test_a_part_with_sha256_digests_has_no_data_digest_and_verifies_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "DATA_DIGEST", "sha256")
    path = _write(tmp_path / "p.h5")
    expected = _expected(lambda data: hashlib.sha256(data).hexdigest())
    with h5py.File(path) as handle:
        assert "data_digest" not in handle.attrs
        assert handle.attrs["content_sha256"] == expected == content_checksum(handle)
    monkeypatch.undo()  # read with today's default: what the part records decides
    with h5py.File(path) as handle:
        assert content_checksum(handle) == expected


def _old_store(folder):
    folder.mkdir(parents=True)
    with gzip.open(FIXTURES / "store-1c09a90.h5.gz") as packed, open(folder / OLD_PART, "wb") as part:
        shutil.copyfileobj(packed, part)
    return folder


def test_an_old_part_keeps_its_checksum_and_the_interventions_store_hash(tmp_path):
    folder = _old_store(tmp_path / "old")
    with h5py.File(folder / OLD_PART) as handle:
        assert "data_digest" not in handle.attrs and content_checksum(handle) == OLD_CONTENT_SHA256
    assert store_content_hash(folder) == OLD_STORE_HASH
    with h5py.File(folder / OLD_PART, "a") as handle:  # a part written before content_sha256 existed: recomputed
        del handle.attrs["content_sha256"]
    assert recorded_checksum(folder / OLD_PART) == ""
    assert recorded_checksum(folder / OLD_PART, recompute=True) == OLD_CONTENT_SHA256
    assert store_content_hash(folder) == OLD_STORE_HASH


@pytest.mark.parametrize("writer_version", ["9.9.0", None])
def test_a_data_digest_this_version_does_not_know_is_refused_in_one_line(tmp_path, writer_version):
    path = _write(tmp_path / "p.h5")
    with h5py.File(path, "a") as handle:
        handle.attrs["data_digest"] = "blake9"
        if writer_version:
            handle.attrs["package_version"] = writer_version
    written_by = f"speech-gender-probing {writer_version}" if writer_version else "a version of speech-gender-probing that it does not record"
    with h5py.File(path) as handle, pytest.raises(StoreError) as refused:
        content_checksum(handle)
    message = str(refused.value)
    assert "\n" not in message and "p.h5" in message and "'blake9'" in message and written_by in message
    assert f"speech-gender-probing {__version__} knows sha256, xxh3_128" in message
    with h5py.File(path, "a") as handle:
        del handle.attrs["content_sha256"]
    with pytest.raises(StoreError, match="blake9"):
        recorded_checksum(path, recompute=True)


def test_damage_to_one_byte_after_the_part_is_complete_changes_the_recomputed_checksum(tmp_path):
    path = _write(tmp_path / "p.h5")
    with h5py.File(path, "a") as handle:
        data = handle["sites/a.site/data"]
        data[5, 1] = np.float16(data[5, 1]) + np.float16(1)
    with h5py.File(path) as handle:
        assert content_checksum(handle) != handle.attrs["content_sha256"]


def test_a_store_of_sha256_parts_resumed_with_xxh3_128_parts_reads_and_verifies_part_by_part(tmp_path, monkeypatch):
    """An extraction by the writer before xxh3_128 (sha256 digests, no data_digest) stopped after
    two of its three parts, resumed by today's: the old parts are kept, the new one records xxh3_128,
    every part verifies with its own digests, the states equal an extraction by the old writer alone,
    and the fingerprints (the probes' store_identity, the interventions' store hash) are stable."""
    import soundfile

    from extract.families import tiny_extractor
    from extract.manifest import Utterance
    from extract.runner import run_extraction
    from extract.store import ShardReader, store_parts
    from probing.data import store_identity

    rng = np.random.default_rng(3)
    utterances = []
    for number in range(6):
        path = tmp_path / f"u{number}.wav"
        soundfile.write(path, (0.1 * rng.standard_normal(4000 + 800 * number)).astype(np.float32), 16_000)
        utterances.append(
            Utterance(id=f"u{number}", audio=str(path), language="en", text="x", gender="female", speaker=f"s{number}", split="train", dataset="t")
        )
    extractor, sites = tiny_extractor("whisper"), ["encoder.layer.0", "encoder.final"]

    def extract(folder):
        run_extraction(
            extractor, utterances, sites, folder, config={"manifest_sha256": "0" * 64}, show_progress=False, options=ExtractOptions(utterances_per_part=2)
        )

    monkeypatch.setattr(writer, "DATA_DIGEST", "sha256")
    extract(tmp_path / "old")
    extract(tmp_path / "resumed")
    store_parts(tmp_path / "resumed")[-1].unlink()  # stopped before its last part
    monkeypatch.undo()
    extract(tmp_path / "resumed")
    parts = store_parts(tmp_path / "resumed")
    digests = []
    for part in parts:
        with h5py.File(part) as handle:
            digests.append(str(handle.attrs.get("data_digest", "sha256")))
        assert recorded_checksum(part) == recorded_checksum(part, recompute=True)
    assert digests == ["sha256", "sha256", "xxh3_128"]
    old, resumed = ShardReader(tmp_path / "old"), ShardReader(tmp_path / "resumed")
    assert resumed.ids == old.ids and all(np.array_equal(resumed.get(site, i), old.get(site, i)) for site in sites for i in old.ids)
    assert [recorded_checksum(part) for part in parts[:2]] == [recorded_checksum(part) for part in store_parts(tmp_path / "old")[:2]]
    assert store_identity(tmp_path / "resumed") == store_identity(tmp_path / "resumed")
    assert store_content_hash(tmp_path / "resumed") == store_content_hash(tmp_path / "resumed") != store_content_hash(tmp_path / "old")
