"""A store is checked as a whole before its numbers are used (issue 42, round 4's K15, X51, S01-S03,
S13, S14, D06): a store missing parts or beside a writer's claims is refused unless allowed (and then
says what it lacks), a part's labels are inside its checksum (format 2), a site's data is compared
with its recorded digest when read, and a resumed extraction re-extracts a part whose bytes or labels
changed. Parts of format 1 (the committed ``store-f8642c9.h5.gz``) read and verify with what they record."""

import gzip
import json
import shutil

import h5py
import numpy as np
import pytest

from extract.manifest import Utterance
from extract.stage_options import ExtractOptions
from extract.store import (
    DamagedPartError,
    GeneratedTokens,
    IncompleteStoreError,
    PartWriter,
    ShardReader,
    StoreAttributes,
    TokenPartWriter,
    part_content_damage,
    part_name,
)
from extract.store.folder import expected_parts, resume_damage
from tests.paths import FIXTURES

SITE = "encoder.layer.0"
PER_PART = 10
CONFIG = {"model": "whisper", "num_shards": 1, "utterances_per_part": PER_PART, "limit": None, "manifest": "m.jsonl", "manifest_sha256": "0" * 64}


def _rows():
    return [(g, s, u) for g in ("female", "male") for s in range(5) for u in range(4)]


def _store(folder, parts=4, manifest_utterances=40, config=CONFIG, kind_writer=PartWriter):
    """40 utterances of 10 speakers (3 train, 1 dev, 1 test per gender) in ``parts`` parts of 10, as a
    one-shard extraction of a 40-utterance manifest names and records them."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = _rows()
    attributes = StoreAttributes(model_id="synthetic", config=config, manifest_utterances=manifest_utterances, skipped=[])
    for number in range(parts):
        with PartWriter(folder / part_name(0, 1, number), {SITE: 4}, "float32", attributes) as writer:
            for gender, speaker, utterance in rows[number::4]:  # every part holds both genders of every split
                sign = 1.0 if gender == "female" else -1.0
                split = "train" if speaker < 3 else "dev" if speaker == 3 else "test"
                meta = {"gender": gender, "speaker": f"{gender}{speaker}", "language": "en", "split": split, "dataset": "t", "duration": 0.2}
                writer.add(f"{gender}{speaker}-{utterance}", {SITE: rng.standard_normal((10, 4)).astype(np.float32) + sign}, meta)
    return folder


def test_expected_parts_follow_the_sharding_and_the_part_size():
    assert expected_parts(7, 2, 3) == {
        "shard0000of0002-part00000.h5": 3,  # shard 0: utterances 0, 2, 4, 6
        "shard0000of0002-part00001.h5": 1,
        "shard0001of0002-part00000.h5": 3,  # shard 1: 1, 3, 5
    }
    assert expected_parts(0, 1, 5) == {}


def test_a_whole_store_reads_and_says_it_is_whole(tmp_path):
    reader = ShardReader(_store(tmp_path / "s"))
    assert len(reader) == 40 and reader.partial is None
    assert reader.means(SITE).shape == (40, 4)


def test_x51_a_store_that_lost_a_part_is_refused_in_one_line_unless_allowed(tmp_path):
    store = _store(tmp_path / "s")
    (store / part_name(0, 1, 1)).unlink()
    with pytest.raises(IncompleteStoreError) as refused:
        ShardReader(store)
    message = str(refused.value)
    assert "\n" not in message and "incomplete store" in message and "10 of its 40 utterances are missing" in message
    assert part_name(0, 1, 1) in message and "experiments.extract" in message and "--allow-partial to use the 30 utterances" in message
    reader = ShardReader(store, allow_partial=True)
    assert len(reader) == 30 and reader.partial.record() == {"used": 30, "expected": 40}


def test_k15_a_killed_extraction_with_stale_claims_is_refused(tmp_path):
    """Killed after 2 of 4 parts: the last two parts absent, their claims (and a temporary part) left behind."""
    store = _store(tmp_path / "s", parts=2)
    (store / (part_name(0, 1, 2) + ".lock")).write_text(json.dumps({"host": "vm", "pid": 999999}))
    (store / part_name(0, 1, 2).replace(".h5", ".h5.tmp")).write_bytes(b"half")
    with pytest.raises(IncompleteStoreError) as refused:
        ShardReader(store)
    message = str(refused.value)
    assert "20 of its 40 utterances are missing" in message and part_name(0, 1, 3) in message
    assert part_name(0, 1, 2) + ".lock" in message and "--reclaim-stale" in message
    assert ShardReader(store, allow_partial=True).partial.record() == {"used": 20, "expected": 40}


def test_every_part_there_beside_a_leftover_claim_is_still_incomplete(tmp_path):
    store = _store(tmp_path / "s")
    (store / (part_name(0, 1, 3) + ".lock")).write_text("{}")
    with pytest.raises(IncompleteStoreError, match=r"claim\(s\) or unfinished part\(s\) shard0000of0001-part00003\.h5\.lock"):
        ShardReader(store)


def test_a_part_without_the_recorded_count_reads_the_manifest_it_names_or_checks_for_gaps(tmp_path):
    from extract.provenance import file_sha256

    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(json.dumps({"id": f"u{i}", "audio": "a.wav", "language": "en", "text": "x", "gender": "female", "speaker": "s"}) + "\n" for i in range(40))
    )
    config = CONFIG | {"manifest": str(manifest), "manifest_sha256": file_sha256(manifest)}
    store = _store(tmp_path / "s", parts=3, manifest_utterances=None, config=config)
    with pytest.raises(IncompleteStoreError, match="10 of its 40 utterances are missing"):
        ShardReader(store)  # counted in the manifest, whose content is the one recorded
    manifest.write_text("changed\n")
    assert ShardReader(store).partial is None  # the count is not known any more: no gap, nothing to refuse
    (store / part_name(0, 1, 1)).unlink()
    with pytest.raises(IncompleteStoreError, match=r"utterances are missing \(part\(s\) shard0000of0001-part00001\.h5 absent\)"):
        ShardReader(store)


def _first_value_changed(part, site=SITE):
    """One stored value changed in place, as a flipped bit on disk does (the recorded digests untouched)."""
    with h5py.File(part, "a") as handle:
        data = handle[f"sites/{site}/data"]
        data[3, 1] = data[3, 1] + 441.7


def test_s02_s03_a_changed_data_byte_is_refused_when_the_site_is_read(tmp_path):
    store = _store(tmp_path / "s")
    _first_value_changed(store / part_name(0, 1, 1))
    reader = ShardReader(store)  # the index and labels are intact: it opens
    for read in (lambda: reader.means(SITE), lambda: reader.get(SITE, reader.ids[10]), lambda: reader.frames(SITE, 0, 3)):
        with pytest.raises(DamagedPartError) as refused:
            read()
        message = str(refused.value)
        assert "\n" not in message and part_name(0, 1, 1) in message and f"the data of site {SITE} differs from its recorded xxh3_128 digest" in message
    assert reader.get(SITE, reader.ids[0]).shape == (10, 4)  # another part reads


def test_s13_edited_labels_are_refused_when_the_store_is_opened(tmp_path):
    store = _store(tmp_path / "s")
    with h5py.File(store / part_name(0, 1, 1), "a") as handle:
        genders = handle["meta/gender"].asstr()[:].tolist()
        del handle["meta/gender"]
        handle.create_dataset("meta/gender", data=np.array(["male" if g == "female" else "female" for g in genders], dtype=object), dtype=h5py.string_dtype())
    with pytest.raises(DamagedPartError, match=r"part00001\.h5: damaged part \(its index or labels .*meta/gender.* differ from its content checksum"):
        ShardReader(store)
    assert part_content_damage(store / part_name(0, 1, 1)).startswith("its index or labels")


def test_the_resume_refuses_to_skip_a_part_whose_labels_differ_from_the_manifest(tmp_path):
    store = _store(tmp_path / "s", parts=1)
    part = [
        Utterance(
            id=f"{g}{s}-{u}",
            audio="a.wav",
            language="en",
            text="",
            gender=g,
            speaker=f"{g}{s}",
            split="train" if s < 3 else "dev" if s == 3 else "test",
            dataset="t",
        )
        for g, s, u in _rows()[0::4]
    ]
    assert resume_damage(store / part_name(0, 1, 0), part) is None
    part[2] = Utterance(id=part[2].id, audio="a.wav", language="en", text="", gender="male", speaker=part[2].speaker, split=part[2].split, dataset="t")
    assert resume_damage(store / part_name(0, 1, 0), part) == f"utterance {part[2].id}'s gender differ from the manifest's: labels edited after it was written"


def test_d06_edited_tokens_name_the_decoder_states_command(tmp_path):
    path = tmp_path / "d" / part_name(0, 1, 0)
    path.parent.mkdir()
    attributes = StoreAttributes(config=CONFIG | {"kind": "decoder_states"}, manifest_utterances=1, skipped=[])
    with TokenPartWriter(path, {SITE: 2}, "float32", attributes) as writer:
        writer.add("u0", {SITE: np.ones((2, 2), np.float32)}, {"gender": "female", "speaker": "s"}, tokens=GeneratedTokens((5, 6), ("a", "b")))
    with h5py.File(path, "a") as handle:
        handle["tokens/ids"][0] = 7
    assert part_content_damage(path) == "its generated tokens differ from their recorded sha256"
    with pytest.raises(DamagedPartError, match=r"rerun the experiments\.decoder_states command that wrote it"):
        ShardReader(path.parent).tokens("u0")


def _old_part(folder, name="store-f8642c9.h5.gz"):
    folder.mkdir(parents=True)
    part = folder / part_name(0, 1, 0)
    with gzip.open(FIXTURES / name) as packed, open(part, "wb") as out:
        shutil.copyfileobj(packed, out)
    return part


def test_a_committed_format_1_part_reads_and_is_verified_with_what_it_records(tmp_path):
    """Written by the code at f8642c9 (format 1: xxh3_128 digests, labels outside the checksum, no per-site digest)."""
    part = _old_part(tmp_path / "old")
    with h5py.File(part) as handle:
        assert "format_version" not in handle.attrs and handle.attrs["data_digest"] == "xxh3_128"
    reader = ShardReader(part.parent)
    assert reader.ids == ["u0", "u1", "u2"] and reader.metadata()["gender"] == ["female", "male", "female"]
    assert reader.get("a.site", "u2").shape == (7, 3) and part_content_damage(part) is None
    reader.close()
    _first_value_changed(part, "b.site")
    with pytest.raises(DamagedPartError, match=r"its content differs from its recorded checksum \(xxh3_128 data digests\)"):
        ShardReader(part.parent).get("a.site", "u0")  # its digests are per part: any site's read checks the whole part
    assert part_content_damage(part).startswith("its content differs")


def test_a_sha256_era_part_still_verifies(tmp_path):
    part = _old_part(tmp_path / "old", "store-1c09a90.h5.gz")
    assert part_content_damage(part) is None
    assert ShardReader(part.parent).means("encoder.final").shape[0] == 2


# --- the resumed extraction ------------------------------------------------------------------------


def _utterances(folder, genders=("female", "male", "female")):
    import soundfile

    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    utterances = []
    for index, gender in enumerate(genders):
        path = folder / f"u{index}.wav"
        soundfile.write(path, (0.1 * rng.standard_normal(8_000)).astype(np.float32), 16_000)
        utterances.append(Utterance(id=f"u{index}", audio=str(path), language="en", text="x", gender=gender, speaker=f"s{index}", split="train", dataset="t"))
    return utterances


@pytest.mark.parametrize("damage", ["data", "labels"])
def test_s01_s14_a_resumed_extraction_re_extracts_a_part_whose_bytes_or_labels_changed(tmp_path, damage, capsys):
    from extract.families import tiny_extractor
    from extract.runner import run_extraction

    extractor, utterances = tiny_extractor("whisper"), _utterances(tmp_path / "audio")
    config = {"model": "whisper", "num_shards": 1, "utterances_per_part": 1, "manifest_sha256": "0" * 64}
    store = tmp_path / "s"
    run_extraction(extractor, utterances, ["encoder.final"], store, config=config, show_progress=False, options=ExtractOptions(utterances_per_part=1))
    before = ShardReader(store).means("encoder.final")
    part = store / part_name(0, 1, 1)
    if damage == "data":
        _first_value_changed(part, "encoder.final")
    else:
        with h5py.File(part, "a") as handle:
            del handle["meta/gender"]
            handle.create_dataset("meta/gender", data=np.array(["female"], dtype=object), dtype=h5py.string_dtype())
    report = run_extraction(extractor, utterances, ["encoder.final"], store, config=config, show_progress=False, options=ExtractOptions(utterances_per_part=1))
    assert f"{part}: damaged part (" in capsys.readouterr().err and report.resumed == 2
    reader = ShardReader(store)
    np.testing.assert_array_equal(reader.means("encoder.final"), before)
    assert reader.metadata()["gender"] == ["female", "male", "female"]


def test_a_store_extracted_now_records_what_makes_it_whole(tmp_path):
    from extract.families import tiny_extractor
    from extract.runner import run_extraction

    utterances = _utterances(tmp_path / "audio")
    config = {"model": "whisper", "num_shards": 2, "utterances_per_part": 1, "manifest_sha256": "0" * 64}
    run_extraction(
        tiny_extractor("whisper"),
        utterances,
        ["encoder.final"],
        tmp_path / "s",
        config=config,
        show_progress=False,
        options=ExtractOptions(num_shards=2, shard_index=0, utterances_per_part=1),
    )
    with pytest.raises(IncompleteStoreError, match=r"1 of its 3 utterances are missing \(part\(s\) shard0001of0002-part00000\.h5 absent\)"):
        ShardReader(tmp_path / "s")  # shard 1 of 2 not extracted yet


# --- the commands ----------------------------------------------------------------------------------


def test_probe_refuses_a_partial_store_and_records_partial_when_allowed(tmp_path, capsys):
    from experiments import probe

    store = _store(tmp_path / "s")
    (store / part_name(0, 1, 3)).unlink()
    out = tmp_path / "p.jsonl"
    argv = ["--store", str(store), "--site", SITE, "--probe", "mean", "--device", "cpu", "--out", str(out)]
    assert probe.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "incomplete store" in error and "10 of its 40 utterances are missing" in error
    assert not out.exists()
    assert probe.main([*argv, "--allow-partial"]) == 0
    row = json.loads(out.read_text().splitlines()[0])
    assert row["partial"] == {"used": 30, "expected": 40} and row["config"]["allow_partial"] is True


def test_erase_fit_refuses_a_partial_store_and_records_partial_when_allowed(tmp_path, capsys):
    from experiments import erase
    from extract.interventions import load_intervention

    store = _store(tmp_path / "s")
    (store / part_name(0, 1, 3)).unlink()
    out = tmp_path / "e.safetensors"
    argv = ["fit", "--store", str(store), "--site", SITE, "--out", str(out)]
    assert erase.main(argv) == 2
    assert "incomplete store" in capsys.readouterr().err and not out.exists()
    assert erase.main([*argv, "--allow-partial"]) == 0
    assert load_intervention(out).fit["partial"] == {"used": 30, "expected": 40}


def test_activation_batches_refuse_a_partial_store(tmp_path):
    from extract.activations import ActivationBatches

    store = _store(tmp_path / "s")
    (store / part_name(0, 1, 0)).unlink()
    with pytest.raises(IncompleteStoreError):
        ActivationBatches(store, SITE)
    assert len(ActivationBatches(store, SITE, batch_size=8, allow_partial=True).reader) == 30


def test_a_format_2_part_without_its_content_checksum_is_damaged(tmp_path):
    store = _store(tmp_path / "s")
    with h5py.File(store / part_name(0, 1, 2), "a") as handle:
        del handle.attrs["content_sha256"]
    with pytest.raises(DamagedPartError, match=r"part00002\.h5: damaged part \(no content checksum \(content_sha256\)"):
        ShardReader(store)


def test_k01_k03_a_complete_part_beside_its_killed_writer_s_claim_is_refused_then_reclaimed(tmp_path, capsys):
    """Killed while the part ended: the part renamed complete, its claim left behind. The rerun names the
    stale claim; with --reclaim-stale it removes it, so that readers take the store as whole."""
    from extract.claims import ClaimError
    from extract.families import tiny_extractor
    from extract.runner import run_extraction

    extractor, utterances = tiny_extractor("whisper"), _utterances(tmp_path / "audio")
    config = {"model": "whisper", "num_shards": 1, "utterances_per_part": 1, "manifest_sha256": "0" * 64}
    store = tmp_path / "s"
    run_extraction(extractor, utterances, ["encoder.final"], store, config=config, show_progress=False, options=ExtractOptions(utterances_per_part=1))
    lock = store / (part_name(0, 1, 1) + ".lock")
    lock.write_text(json.dumps({"host": __import__("socket").gethostname(), "pid": 999_999_999, "since": "2026-12-01T00:00:00+0000"}))
    with pytest.raises(IncompleteStoreError):
        ShardReader(store)
    with pytest.raises(ClaimError, match="stale claim .*--reclaim-stale"):
        run_extraction(extractor, utterances, ["encoder.final"], store, config=config, show_progress=False, options=ExtractOptions(utterances_per_part=1))
    run_extraction(
        extractor, utterances, ["encoder.final"], store, config=config, show_progress=False, reclaim_stale=True, options=ExtractOptions(utterances_per_part=1)
    )
    assert "reclaimed the stale claim" in capsys.readouterr().err and not lock.exists()
    assert ShardReader(store).partial is None
