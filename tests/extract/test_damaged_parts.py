"""A part with its final name that cannot be read is damage: every reader refuses it, naming the part
and how to rebuild it, and never leaves it out; the extraction rerun re-extracts it."""

import h5py
import numpy as np
import pytest

from extract.interventions import store_content_hash
from extract.stage_options import ExtractOptions
from extract.store import DamagedPartError, IncompleteStoreError, PartWriter, ShardReader, StoreError, complete_parts, is_complete
from extract.store.format import temporary_path
from probing.data import store_identity

SITE = "encoder.layer.0"
PARTS = 4
REBUILD = "rerun the experiments.extract command that wrote it (same --out) to re-extract it"


def _store(folder):
    """40 utterances of 10 speakers (5 per gender: 3 train, 1 dev, 1 test) in 4 parts of 10."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = [(g, s, u) for g in ("female", "male") for s in range(5) for u in range(4)]
    attributes = {"model_id": "synthetic", "config": "{}", "skipped": "[]"}
    for number in range(PARTS):
        with PartWriter(folder / f"part-{number:05d}.h5", {SITE: 4}, "float32", attributes) as writer:
            for gender, speaker, utterance in rows[number::PARTS]:
                sign = 1.0 if gender == "female" else -1.0
                split = "train" if speaker < 3 else "dev" if speaker == 3 else "test"
                meta = {"gender": gender, "speaker": f"{gender}{speaker}", "language": "en", "split": split, "dataset": "t", "duration": 0.2}
                writer.add(f"{gender}{speaker}-{utterance}", {SITE: rng.standard_normal((10, 4)).astype(np.float32) + sign}, meta)
    return folder


def _truncate(part):
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])


def _not_hdf5(part):
    part.write_bytes(b"not an HDF5 file\n" * 100)


def _empty(part):
    part.write_bytes(b"")


def _unflagged(part):
    with h5py.File(part, "r+") as handle:
        handle.attrs["complete"] = False


DAMAGE = {
    "truncated": (_truncate, "cannot be read as HDF5"),
    "not HDF5": (_not_hdf5, "cannot be read as HDF5"),
    "empty": (_empty, "cannot be read as HDF5"),
    "not marked complete": (_unflagged, "not marked complete"),
}


@pytest.fixture
def damaged(tmp_path, request):
    """A 4-part store whose part 1 is damaged the way the parameter names; (store, part, reason)."""
    damage, reason = DAMAGE[request.param]
    store = _store(tmp_path / "store")
    part = store / "part-00001.h5"
    damage(part)
    return store, part, reason


def _assert_names_the_part(message, part, reason):
    assert f"{part}: damaged part ({reason}" in message
    assert REBUILD in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("damaged", sorted(DAMAGE), indirect=True)
def test_every_reader_refuses_a_damaged_part_naming_it(damaged):
    store, part, reason = damaged
    for read in (ShardReader, complete_parts, store_identity, store_content_hash):
        with pytest.raises(DamagedPartError) as error:
            read(store)
        _assert_names_the_part(str(error.value), part, reason)
    with pytest.raises(DamagedPartError):  # the part itself, given as the store
        ShardReader(part)
    assert isinstance(error.value, StoreError)  # every command's one-line error path already catches it


def test_the_writer_side_treats_a_damaged_part_as_not_finished(tmp_path):
    store = _store(tmp_path / "store")
    _truncate(store / "part-00001.h5")
    assert not is_complete(store / "part-00001.h5") and is_complete(store / "part-00000.h5")
    assert not is_complete(store / "part-00009.h5")  # never written


def test_an_unfinished_part_under_its_temporary_name_is_not_a_part(tmp_path):
    store = _store(tmp_path / "store")
    temporary_path(store / "part-00004.h5").write_bytes(b"half written")
    assert [p.name for p in complete_parts(store)] == [f"part-{n:05d}.h5" for n in range(PARTS)]
    with pytest.raises(IncompleteStoreError, match=r"incomplete store: .*part-00004\.h5\.tmp .*--allow-partial to use the 40 utterances"):
        ShardReader(store)  # a writer still runs beside it, or was killed: not a whole store
    reader = ShardReader(store, allow_partial=True)
    assert len(reader) == 40 and reader.partial.claims == ("part-00004.h5.tmp",)


def test_a_part_damaged_after_the_reader_opened_the_store_is_named(tmp_path):
    store = _store(tmp_path / "store")
    reader = ShardReader(store)
    _not_hdf5(store / "part-00002.h5")
    with pytest.raises(DamagedPartError) as error:
        reader.means(SITE)
    _assert_names_the_part(str(error.value), store / "part-00002.h5", "cannot be read as HDF5")


@pytest.mark.parametrize("damaged", ["truncated"], indirect=True)
def test_erase_fit_refuses_a_store_with_a_damaged_part(damaged, tmp_path, capsys):
    """#128: erase fit silently fitted on 14 of 24 training utterances and exited 0."""
    from experiments import erase

    store, part, reason = damaged
    out = tmp_path / "e.safetensors"
    assert erase.main(["fit", "--store", str(store), "--site", SITE, "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and len(error.splitlines()) == 1
    _assert_names_the_part(error.removeprefix("error: ").strip(), part, reason)
    assert not out.exists()


@pytest.mark.parametrize("damaged", ["truncated"], indirect=True)
def test_a_probe_refuses_a_store_with_a_damaged_part(damaged, tmp_path, capsys):
    """#128 and #129: a probe scored 35 of 40 utterances and exited 0, or said the test split lacked a class."""
    from experiments import probe

    store, part, reason = damaged
    out = tmp_path / "p.jsonl"
    assert probe.main(["--store", str(store), "--site", SITE, "--probe", "mean", "--device", "cpu", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and len(error.splitlines()) == 1
    _assert_names_the_part(error.removeprefix("error: ").strip(), part, reason)
    assert not out.exists() or not out.read_text().strip()


@pytest.mark.parametrize("damaged", ["not HDF5"], indirect=True)
def test_speaker_embeddings_from_a_store_refuse_a_damaged_part(damaged, tmp_path):
    from experiments.analysis.speakers import SpeakerError, store_embeddings

    store, part, reason = damaged
    with pytest.raises(SpeakerError) as error:
        store_embeddings(str(store), SITE, ["female0-0"])
    _assert_names_the_part(str(error.value), part, reason)


def test_the_extraction_rerun_re_extracts_a_truncated_part_and_says_so(tmp_path, capsys):
    """#130 stays good: the writer treats a damaged part as to redo, and the store equals an intact one."""
    from extract.families import tiny_extractor
    from extract.manifest import write_manifest
    from extract.runner import run_extraction
    from tests.extract.test_store_hardening import _corpus

    manifest = _corpus(tmp_path, seconds=(0.5, 0.6, 0.7, 0.8))
    write_manifest(tmp_path / "m.jsonl", manifest)
    extractor = tiny_extractor("whisper")
    out = tmp_path / "s"

    def extract():
        return run_extraction(
            extractor, manifest, [SITE], out, config={"test": 1}, show_progress=False, options=ExtractOptions(storage_dtype="float32", utterances_per_part=2)
        )

    extract()
    intact = ShardReader(out).means(SITE)
    _truncate(out / "shard0000of0001-part00001.h5")
    capsys.readouterr()
    report = extract()
    assert (report.written, report.resumed) == (2, 2)
    assert f"{out / 'shard0000of0001-part00001.h5'}: damaged part (cannot be read as HDF5" in capsys.readouterr().err
    np.testing.assert_array_equal(ShardReader(out).means(SITE), intact)
