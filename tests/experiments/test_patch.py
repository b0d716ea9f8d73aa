"""The patch stage (experiments.patching, ``python -m experiments.patch``): pairs across genders and
within, matched by text and duration and seeded; scores on hand-computed examples; a run that
resumes, refuses other settings, and fails in one line; the command end to end on the tiny Whisper."""

import json
import re
from functools import partial

import numpy as np
import pytest
import soundfile

from experiments import patch as patch_cli
from experiments.patching.pairs import PairsError, form_pairs, read_pairs, write_pairs
from experiments.patching.run import PatchJob, PatchOptions, pairs_path, run_patching, summary_path
from experiments.patching.scoring import asr_scores, mustshe_scores
from experiments.patching.summary import site_summary
from experiments.scoring.asr_metrics import Scoring
from extract.manifest import Utterance, write_manifest
from extract.options import OptionError
from extract.runner import SettingsMismatchError
from extract.spec import ModelSpec
from tests.commands import one_line_error

RATE = 16_000


def _utterance(identifier, gender, speaker, seconds, text=None, **extra):
    text = text or f"the words of {identifier}"
    return Utterance(id=identifier, audio=f"{identifier}.wav", language="en", text=text, gender=gender, speaker=speaker, duration=seconds, extra=extra)


# ---------------------------------------------------------------- pairs


def test_cross_pairs_take_the_nearest_duration_of_the_other_gender_and_within_pairs_another_speaker():
    utterances = [
        _utterance("a", "female", "F1", 1.0),
        _utterance("b", "female", "F2", 3.0),
        _utterance("c", "male", "M1", 1.1),
        _utterance("d", "male", "M2", 2.9),
    ]
    pairs, unpaired = form_pairs(utterances, seed=3)
    assert sorted((p.target, p.source) for p in pairs if p.pairing == "cross") == [("a", "c"), ("b", "d"), ("c", "a"), ("d", "b")]
    assert sorted((p.target, p.source) for p in pairs if p.pairing == "within") == [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")]
    assert not unpaired
    for pair in pairs:
        assert pair.target_speaker != pair.source_speaker and pair.match == "duration"
        assert (pair.target_gender != pair.source_gender) == (pair.pairing == "cross")


def test_a_shared_text_wins_over_a_nearer_duration_and_sources_are_not_reused():
    utterances = [
        _utterance("a", "female", "F1", 1.0, text="The  cat sat"),
        _utterance("b", "female", "F2", 1.05),
        _utterance("c", "male", "M1", 1.1),
        _utterance("d", "male", "M2", 4.0, text="the cat sat"),
    ]
    cross = {p.target: p for p in form_pairs(utterances, ["cross"])[0]}
    assert cross["a"].source == "d" and cross["a"].match == "text"
    assert cross["b"].source == "c" and cross["b"].match == "duration"  # d is taken: without replacement
    assert len({p.source for p in cross.values()}) == len(cross)


def test_pairs_are_seeded_and_a_tie_goes_either_way_across_seeds():
    utterances = [_utterance("a", "female", "F1", 1.0), _utterance("c", "male", "M1", 1.5), _utterance("e", "male", "M2", 0.5)]

    def source_of_a(seed):
        return next(p.source for p in form_pairs(utterances, ["cross"], seed)[0] if p.target == "a")

    assert source_of_a(7) == source_of_a(7)
    assert {source_of_a(seed) for seed in range(12)} == {"c", "e"}


def test_targets_without_a_source_and_other_labels_are_listed_as_unpaired():
    utterances = [_utterance("a", "female", "F1", 1.0), _utterance("b", "female", "F1", 1.2), _utterance("x", "other", "X", 1.0)]
    pairs, unpaired = form_pairs(utterances)
    assert pairs == []
    reasons = {(entry["target"], entry["pairing"]): entry["reason"] for entry in unpaired}
    assert reasons[("a", "cross")] == "no source of the other gender left in en"
    assert reasons[("a", "within")] == "no source of the same gender and another speaker left in en"
    assert reasons[("x", "cross")] == "gender 'other' is neither female nor male"


def test_an_utterance_whose_length_cannot_be_read_is_listed_as_unpaired(tmp_path):
    utterances = [_utterance("a", "female", "F1", 1.0), _utterance("c", "male", "M1", 1.1)]
    utterances.append(Utterance(id="gone", audio=str(tmp_path / "gone.wav"), language="en", text="x", gender="male", speaker="M2"))
    pairs, unpaired = form_pairs(utterances, ["cross"])
    assert sorted((p.target, p.source) for p in pairs) == [("a", "c"), ("c", "a")]
    assert unpaired == [{"target": "gone", "pairing": "cross", "reason": unpaired[0]["reason"]}]
    assert unpaired[0]["reason"].startswith(f"cannot read the length of {tmp_path / 'gone.wav'}")


def test_a_pairs_file_round_trips_and_is_checked_against_the_manifest(tmp_path):
    utterances = [_utterance("a", "female", "F1", 1.0), _utterance("c", "male", "M1", 1.1)]
    pairs, unpaired = form_pairs(utterances, ["cross"])
    path = write_pairs(tmp_path / "p.jsonl", pairs, unpaired)
    assert read_pairs(path, utterances) == pairs
    with pytest.raises(PairsError, match=r"p.jsonl:1: target 'a' is not in the manifest"):
        read_pairs(path, utterances[1:])
    moved = [utterances[0], _utterance("c", "female", "M1", 1.1)]
    with pytest.raises(PairsError, match="another language, gender or speaker"):
        read_pairs(path, moved)


def test_a_pairs_file_that_breaks_the_pairing_rules_is_refused_naming_its_line(tmp_path):
    utterances = [_utterance("m1", "male", "M1", 1.0), _utterance("m2", "male", "M2", 1.1), _utterance("f1", "female", "F1", 1.0)]
    within = next(pair for pair in form_pairs(utterances, ["within"])[0] if pair.target == "m1")
    relabelled = {**within.to_dict(), "pairing": "cross", "pair": "cross:m1<m2"}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(form_pairs(utterances, ["cross"])[0][0].to_dict()) + "\n" + json.dumps(relabelled) + "\n")
    with pytest.raises(PairsError, match=r"p.jsonl:2: cross:m1<m2 pairs a male target with a male source; a cross source is of the other gender"):
        read_pairs(path, utterances)
    own = {**within.to_dict(), "source": "m1", "source_speaker": "M1", "source_seconds": 1.0}
    path.write_text(json.dumps(own) + "\n")
    with pytest.raises(PairsError, match=r"p.jsonl:1: within:m1<m1 takes its source from the target's own speaker 'M1'"):
        read_pairs(path, utterances)
    across = {**within.to_dict(), "source": "f1", "source_speaker": "F1", "source_gender": "female"}
    path.write_text(json.dumps(across) + "\n")
    with pytest.raises(PairsError, match=r"p.jsonl:1: .* a within source is of the same gender"):
        read_pairs(path, utterances)


# ---------------------------------------------------------------- scores


def test_asr_scores_by_hand():
    scores = asr_scores("The cat sat.", "the cat sat", "the bat", "en", Scoring())
    assert scores == {
        "reference_length": 3,
        "plain_errors": 0,
        "patched_errors": 2,  # cat -> bat, sat deleted
        "plain_error_rate": 0.0,
        "patched_error_rate": pytest.approx(200 / 3),
        "effect": pytest.approx(200 / 3),
    }


def test_mustshe_category_1_follows_the_source_gender_by_hand():
    target = _utterance("t", "female", "F1", 1.0, category="1F", genderterms="cansada cansado;lista listo")
    scores = mustshe_scores(target, "male", "Estoy cansada y lista.", "Estoy cansado y listo.", "es")
    assert scores["plain_gender"] == "feminine" and scores["patched_gender"] == "masculine"
    assert scores["source_form"] == "masculine" and scores["follows_source"] and not scores["followed_source_before"]
    assert scores["effect"] == 100.0
    mixed = mustshe_scores(target, "male", "Estoy cansada y lista.", "Estoy cansado y lista.", "es")
    assert mixed["patched_gender"] == "mixed" and not mixed["follows_source"] and mixed["effect"] == 0.0
    assert mustshe_scores(_utterance("u", "female", "F1", 1.0), "male", "a", "b", "es") == {
        "scored": False,
        "reason": "no MuST-SHE annotation (category and genderterms) in the manifest",
    }
    other = _utterance("v", "female", "F1", 1.0, category="2M", genderterms="él ella")
    assert "refer to someone else than the speaker" in mustshe_scores(other, "male", "a", "b", "es")["reason"]


def _row(pairing, speaker, reference_length, plain, patched, site="encoder.layer.0", source="S1", logprob=None):
    scores = {"reference_length": reference_length, "plain_errors": plain, "patched_errors": patched}
    graded = {"scored": False, "reason": "not given"} if logprob is None else {"scored": True, "effect": logprob}
    return {
        "site": site,
        "site_index": 1,
        "task": "asr",
        "pairing": pairing,
        "target_speaker": speaker,
        "source_speaker": source,
        "match": "text",
        "asr": scores,
        "logprob": graded,
    }


def test_the_site_summary_by_hand():
    rows = [_row("cross", "F1", 4, 1, 3, logprob=-0.5), _row("cross", "F1", 6, 0, 1, logprob=-0.25), _row("within", "M1", 5, 1, 1, logprob=0.1)]
    rows.append({**_row("within", "M1", 0, 0, 0), "asr": None, "unscored": "reference is empty after normalization"})
    entry = site_summary(rows, iterations=20)["encoder.layer.0"]
    assert entry["primary"] == "logprob" and entry["unit"] == "nats per token"
    assert entry["pairings"]["cross"] == {"pairs": 2, "scored": 2, "not_patched": 0, "speakers": 1, "effect": pytest.approx(-0.375)}  # mean of -0.5, -0.25
    assert entry["pairings"]["within"] == {"pairs": 2, "scored": 1, "not_patched": 0, "speakers": 1, "effect": pytest.approx(0.1)}
    assert entry["cross_minus_within"] == pytest.approx(-0.475) and entry["match_used"] == "text"
    assert entry["ci95"] == [None, None] and "one target and one source speaker per pairing" in entry["ci95_note"]
    wer = entry["metrics"]["wer"]
    assert wer["unit"] == "points" and wer["pairings"]["cross"]["effect"] == pytest.approx(30.0)  # (3 + 1 - 1 - 0) / 10 words
    assert wer["pairings"]["within"]["effect"] == 0.0 and wer["cross_minus_within"] == pytest.approx(30.0)
    more = rows + [_row("cross", "F2", 2, 0, 0, source="S2", logprob=0.0), _row("within", "M2", 2, 0, 2, source="S2", logprob=-1.0)]
    low, high = site_summary(more, iterations=200)["encoder.layer.0"]["ci95"]
    assert low <= high


# ---------------------------------------------------------------- runs on the tiny Whisper


def _corpus(root, speakers=(("F1", "female"), ("M1", "male"), ("F2", "female"), ("M2", "male"))):
    rng = np.random.default_rng(0)
    utterances = []
    for number, (speaker, gender) in enumerate(speakers):
        seconds = 0.5 + 0.1 * number
        path = root / f"{speaker}.wav"
        soundfile.write(path, rng.normal(0, 0.1, int(seconds * RATE)).astype(np.float32), RATE)
        utterances.append(Utterance(id=speaker.lower(), audio=str(path), language="en", text="the cat sat", gender=gender, speaker=speaker))
    return write_manifest(root / "m.jsonl", utterances)


@pytest.fixture(scope="module")
def generator():
    from extract.families.generation import GenerationOptions
    from extract.spec import load_generator

    return load_generator(ModelSpec("whisper", "tiny-random", device="cpu"), GenerationOptions(max_new_tokens=3))


def _job(tmp_path, **options):
    spec = ModelSpec("whisper", "tiny-random", device="cpu")
    return PatchJob(spec, tmp_path / "m.jsonl", tmp_path / "out" / "p.jsonl", PatchOptions(max_new_tokens=3, iterations=20, **options))


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_writes_a_row_per_pair_and_site_and_a_rerun_does_only_what_is_new(tmp_path, generator):
    _corpus(tmp_path)
    first = run_patching(_job(tmp_path, sites="encoder.layer.0"), show_progress=False, generator=generator)
    assert (first.pairs, first.todo, first.written) == (8, 8, 8)
    out = tmp_path / "out" / "p.jsonl"
    rows = _rows(out)
    assert {row["kind"] for row in rows} == {"patch_row"} and {row["site"] for row in rows} == {"encoder.layer.0"}
    assert all(row["patched"]["start"] == 0 and row["patched"]["end"] > 0 and "effect" in row["asr"] for row in rows)
    assert len(_rows(pairs_path(out))) == 8
    out.write_text(out.read_text()[:-40])  # a kill mid-row: the cut line is removed and redone
    again = run_patching(_job(tmp_path, sites="encoder.layer.0,encoder.final"), show_progress=False, generator=generator)
    assert (again.todo, again.written) == (9, 9)
    rows = _rows(out)
    assert len(rows) == 16 and len({row["row_id"] for row in rows}) == 16
    summary = json.loads(summary_path(out).read_text())
    assert summary["kind"] == "patch_summary" and list(summary["sites"]) == ["encoder.layer.0", "encoder.final"]
    assert summary["sites"]["encoder.final"]["pairings"]["cross"]["pairs"] == 4
    assert (tmp_path / "out" / "p.jsonl.effect.png").is_file()
    assert run_patching(_job(tmp_path, sites="encoder.layer.0,encoder.final"), show_progress=False, generator=generator).todo == 0


def test_a_pair_whose_audio_cannot_be_loaded_is_skipped_listed_and_retried(tmp_path, generator):
    manifest = _corpus(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["duration"] = 0.5  # its length known, so that it is paired; its file then goes missing
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    audio = tmp_path / "F1.wav"
    kept = audio.read_bytes()
    audio.unlink()
    report = run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",)), show_progress=False, generator=generator)
    out = tmp_path / "out" / "p.jsonl"
    with_f1 = {p["pair"] for p in _rows(pairs_path(out)) if p["kind"] == "patch_pair" and "f1" in (p["target"], p["source"])}
    assert len(with_f1) == 2 and {entry["pair"] for entry in report.skipped} == with_f1
    assert all(entry["ids"] == ["f1"] and "file not found" in entry["message"] for entry in report.skipped)
    assert report.written == 2 and report.summary["skipped"] == report.skipped
    audio.write_bytes(kept)
    again = run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",)), show_progress=False, generator=generator)
    assert (again.todo, again.written, again.skipped) == (2, 2, [])


def test_a_pairs_file_runs_those_pairs(tmp_path, generator):
    _corpus(tmp_path)
    first = _job(tmp_path, sites="encoder.layer.0", pairings=("within",))
    run_patching(first, show_progress=False, generator=generator)
    chosen = tmp_path / "chosen.jsonl"
    chosen.write_text(pairs_path(first.out).read_text().splitlines()[0] + "\n")
    job = _job(tmp_path, sites="encoder.layer.0,encoder.layer.1", pairs_file=chosen)
    job = PatchJob(job.spec, job.manifest, tmp_path / "out" / "chosen.jsonl", job.options)
    report = run_patching(job, show_progress=False, generator=generator)
    assert (report.pairs, report.todo, report.written) == (1, 2, 2)


def test_what_decides_the_pairs_is_recorded_so_a_rerun_with_another_limit_or_pairs_file_is_refused(tmp_path, generator):
    _corpus(tmp_path)
    run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",), seed=1, limit=3), show_progress=False, generator=generator)
    with pytest.raises(SettingsMismatchError, match="limit: 3 vs None"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",), seed=1), show_progress=False, generator=generator)
    out = tmp_path / "out" / "p.jsonl"
    assert len(_rows(out)) == 2  # f1, m1 and f2: one man
    pairs = pairs_path(out).read_text().splitlines()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(pairs[0] + "\n")
    second.write_text(pairs[1] + "\n")
    other = _job(tmp_path, sites="encoder.layer.0", pairs_file=first, limit=3)
    other = PatchJob(other.spec, other.manifest, tmp_path / "out" / "q.jsonl", other.options)
    run_patching(other, show_progress=False, generator=generator)
    changed = PatchJob(other.spec, other.manifest, other.out, PatchOptions(**{**other.options.__dict__, "pairs_file": second}))
    with pytest.raises(SettingsMismatchError, match="pairs_file_sha256"):
        run_patching(changed, show_progress=False, generator=generator)


def test_the_summary_counts_only_the_rows_of_the_current_pairs(tmp_path, generator):
    """An OUT whose settings were recorded before --limit was among them: the rows of the earlier
    pairs stay in OUT but are left out of the summary, which counts the pairs it lists."""
    manifest = _corpus(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    manifest.write_text("".join(json.dumps({**row, "text": f"words of {row['id']}"}) + "\n" for row in rows))  # no text shared: by duration
    run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",), seed=4, limit=3), show_progress=False, generator=generator)
    out = tmp_path / "out" / "p.jsonl"
    settings = out.with_name(out.name + ".settings.json")
    recorded = json.loads(settings.read_text())
    del recorded["limit"]
    settings.write_text(json.dumps(recorded))
    report = run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",), seed=4), show_progress=False, generator=generator)
    current = {row["pair"] for row in _rows(pairs_path(out)) if row["kind"] == "patch_pair"}
    stale = [row for row in _rows(out) if row["pair"] not in current]
    assert stale and report.other_pairs == len(stale) == report.summary["rows_of_other_pairs"]
    assert report.summary["sites"]["encoder.layer.0"]["pairings"]["cross"]["pairs"] == len(current) == 4


def test_a_span_past_every_frame_replaces_nothing_and_is_not_scored(tmp_path, generator, capsys):
    manifest = _corpus(tmp_path)
    report = run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",), frames="5000:"), show_progress=False, generator=generator)
    rows = _rows(tmp_path / "out" / "p.jsonl")
    assert len(rows) == 4
    assert all(row["patched"]["start"] == row["patched"]["end"] and row["asr"] is None and row["unscored"] == "no frames replaced" for row in rows)
    entry = report.summary["sites"]["encoder.layer.0"]["pairings"]["cross"]
    assert (entry["pairs"], entry["scored"], entry["not_patched"], entry["effect"]) == (4, 0, 4, None)
    base = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--manifest", str(manifest), "--max-new-tokens", "2"]
    argv = [*base, "--sites", "encoder.layer.0", "--pairs", "cross", "--frames", "5000:", "--iterations", "5", "--out", str(tmp_path / "c.jsonl"), "--quiet"]
    assert patch_cli.main(argv) == 0
    assert "4 rows replaced no frame (--frames 5000: past the target's or the source's frames): not scored" in capsys.readouterr().out


def test_a_run_with_nothing_to_patch_is_refused_before_anything_is_written(tmp_path, generator):
    _corpus(tmp_path, speakers=(("F1", "female"), ("F2", "female")))
    with pytest.raises(PairsError, match=r"no cross pairs to patch in the 2 utterances of .*m.jsonl \(first unpaired: f1, no source of the other gender"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",)), show_progress=False, generator=generator)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(PairsError, match="empty.jsonl: no pairs in it"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", pairs_file=empty), show_progress=False, generator=generator)
    assert not (tmp_path / "out").exists()


def test_a_rerun_with_other_settings_is_refused(tmp_path, generator):
    manifest = _corpus(tmp_path)
    run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",)), show_progress=False, generator=generator)
    with pytest.raises(SettingsMismatchError, match="frames: 'speech' vs '0:10'"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", frames="0:10"), show_progress=False, generator=generator)
    manifest.write_text(manifest.read_text().replace("the cat sat", "the cat sat down"))
    with pytest.raises(SettingsMismatchError, match=r"changed since this patch rows file was started .*: use a new --out file"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", pairings=("cross",)), show_progress=False, generator=generator)


def test_options_refuse_bad_values_in_one_line():
    with pytest.raises(OptionError, match="frames 9:3: give START:END with 0 <= START < END"):
        PatchOptions(frames="9:3")
    with pytest.raises(OptionError, match="task st needs tgt_lang"):
        PatchOptions(task="st")
    with pytest.raises(OptionError, match="sites names no site: give at least one site name"):
        PatchOptions(sites="")


_cli_error = partial(one_line_error, patch_cli.main)  # (argv, capsys): the command's one-line refusal


def test_the_command_runs_end_to_end_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    manifest = _corpus(tmp_path)
    out = tmp_path / "cli" / "p.jsonl"
    base = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--manifest", str(manifest), "--max-new-tokens", "2"]
    argv = [*base, "--sites", "encoder.layer.1", "--pairs", "cross", "--iterations", "10", "--out", str(out), "--quiet"]
    assert patch_cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 pairs (cross 4; 0 targets unpaired) x 1 sites" in printed
    assert "[patch] per site, residual patched, noising: each metric per pairing, then cross - within with its 95% CI" in printed
    assert re.search(r"encoder\.layer\.1  logprob \(nats per token\): cross [+-]\d\.\d{4} \(n 4\)\n", printed)
    assert "wer (points): cross +0.00 (n 4)\n" in printed  # one pairing: no cross - within
    assert len(_rows(out)) == 4
    assert _cli_error([*base, "--sites", "encoder.layer.9", "--out", str(tmp_path / "x.jsonl")], capsys).startswith(
        "error: unknown site(s) encoder.layer.9 for whisper; valid sites: encoder.embed"
    )
    assert _cli_error([*base, "--frames", "a:b", "--out", str(tmp_path / "x.jsonl")], capsys).startswith("error: --frames a:b: give 'speech' or START:END")
    assert _cli_error([*base, "--task", "st", "--out", str(tmp_path / "x.jsonl")], capsys) == "error: --task st needs --tgt-lang"
    assert _cli_error([*base, "--sites", "", "--out", str(tmp_path / "x.jsonl")], capsys).startswith("error: --sites names no site: give at least one")
    assert _cli_error([*base, "--frames", "-3:5", "--out", str(tmp_path / "x.jsonl")], capsys).startswith("error: --frames -3:5: frames are counted from 0")
    empty = tmp_path / "empty-pairs.jsonl"
    empty.write_text("")
    refused = _cli_error([*base, "--pairs-file", str(empty), "--out", str(tmp_path / "x.jsonl")], capsys)
    assert refused.endswith("empty-pairs.jsonl: no pairs in it; give a pairs file a patch run wrote (OUT.pairs.jsonl)")
    assert not list(tmp_path.glob("x.jsonl*"))
    broken = tmp_path / "pairs.jsonl"
    broken.write_text('{"kind": "patch_pair", "pairing": "cross"}\n')
    assert "a patch pair without 'target'" in _cli_error([*base, "--pairs-file", str(broken), "--out", str(tmp_path / "x.jsonl")], capsys)


def test_a_translation_run_scores_mustshe_category_1_where_the_manifest_has_it(tmp_path, generator):
    manifest = _corpus(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["extra"] = {"category": "1F", "genderterms": "tired tiredm"}  # f1: annotated; the others are not
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = run_patching(_job(tmp_path, sites="encoder.layer.0", task="st", tgt_lang="en"), show_progress=False, generator=generator)
    assert report.written == 8
    written = {row["target"]: row for row in _rows(tmp_path / "out" / "p.jsonl") if row["pairing"] == "cross"}
    scored = written["f1"]["mustshe"]
    assert scored["scored"] and scored["category"] == "1F" and scored["source_form"] == "masculine"
    assert scored["plain_gender"] == "none" == scored["patched_gender"]  # the random model's words are not the terms
    assert written["m1"]["mustshe"] == {"scored": False, "reason": "no MuST-SHE annotation (category and genderterms) in the manifest"}
    assert written["f1"]["reference"] is None and written["f1"]["tgt_lang"] == "en"
    assert written["f1"]["mustshe"]["expected_form"] == "feminine" and written["f1"]["mustshe"]["outcome"] is None  # no form before: no flip to count
    assert written["f1"]["gender_margin"] == {"scored": False, "reason": "no reference translation in the manifest"}
    site = report.summary["sites"]["encoder.layer.0"]
    assert site["primary"] == "gender_margin" and site["pairings"]["cross"]["scored"] == 0
    assert site["metrics"]["accuracy"]["pairings"]["cross"] == {"scored": 1, "speakers": 1, "source_speakers": 1, "effect": 0.0}
    assert site["metrics"]["flip_rate"]["pairings"]["cross"]["scored"] == 0


def test_an_out_file_of_another_kind_or_a_newer_schema_is_refused_before_anything_runs(tmp_path, generator):
    from extract.appendlog import OutputKindError

    _corpus(tmp_path)
    job = _job(tmp_path, sites="encoder.layer.0")
    job.out.parent.mkdir(parents=True)
    job.out.write_text('{"id": "f1", "hypothesis": "x"}\n')
    with pytest.raises(OutputKindError, match="not a patch row"):
        run_patching(job, show_progress=False, generator=generator)
    job.out.write_text('{"kind": "patch_row", "schema": 3, "row_id": "r", "pair": "p", "site": "s"}\n')
    with pytest.raises(OutputKindError, match="row 1 has schema 3; this code writes and reads 2"):
        run_patching(job, show_progress=False, generator=generator)
    assert not pairs_path(job.out).exists()


# ---------------------------------------------------------------- the targets' frames, counted once per batch


def _zeroswot_generator():
    from extract.families import tiny_extractor
    from extract.families.zeroswot import ZeroSwotGenerator
    from tests.extract.test_transcribe import IdTokenizer, _tiny_nllb

    return ZeroSwotGenerator(tiny_extractor("zeroswot"), IdTokenizer({"spa_Latn": 60}), _tiny_nllb(), max_new_tokens=4)


class _Spy:
    """Counts the calls of ``name`` on ``owner`` (the call itself goes through)."""

    def __init__(self, monkeypatch, owner, name):
        self.calls = 0
        wrapped = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return wrapped(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


@pytest.mark.parametrize("frames", ["speech", "0:"])
def test_the_targets_frames_are_counted_once_per_batch_and_the_rows_are_those_of_counting_per_site(tmp_path, monkeypatch, frames):
    """ZeroSwot's post-adapter frames need an encoder pass of the targets: one per batch for all its
    sites, where it was one per site. The rows are what patching each site on its own gives (its
    targets' frames counted at that site alone: extract.patching.patched_generation without them)."""
    from extract.patching import capture_sources, patched_generation

    manifest = _corpus(tmp_path)
    generator = _zeroswot_generator()
    extractor = generator.extractor
    sites = ["encoder.layer.0", "pre_adapter", "post_adapter"]
    job = PatchJob(
        ModelSpec("zeroswot", "tiny-random", device="cpu"),
        manifest,
        tmp_path / "out" / "p.jsonl",
        PatchOptions(sites=",".join(sites), task="st", tgt_lang="es", frames=frames, max_new_tokens=4, iterations=10),
    )
    prepare, encode = _Spy(monkeypatch, extractor, "prepare"), _Spy(monkeypatch, extractor, "encode")
    report = run_patching(job, show_progress=False, generator=generator)
    assert (report.pairs, report.written) == (8, 24)  # one batch of 8 pairs x 3 sites
    captures = 1 if frames == "speech" else 8  # the sources: one pass, or one per source for a span
    assert encode.calls == captures + 1  # and the targets' frames at every site: one pass
    assert prepare.calls == 1 + captures + 1 + len(sites)  # plain generation, sources, targets' frames, one generation per site
    monkeypatch.undo()

    rows = {(row["pair"], row["site"]): row for row in _rows(job.out)}
    pairs = [row for row in _rows(pairs_path(job.out)) if row["kind"] == "patch_pair"]
    audio = {u["id"]: soundfile.read(u["audio"], dtype="float32")[0] for u in map(json.loads, manifest.read_text().splitlines())}
    targets, span = [audio[pair["target"]] for pair in pairs], job.options.span
    sources = capture_sources(extractor, [audio[pair["source"]] for pair in pairs], sites, span, alone=span is not None)
    for site in sites:
        hypotheses, patch = patched_generation(generator, site, targets, sources, "en", "st", "es", span)
        for position, pair in enumerate(pairs):
            row = rows[(pair["pair"], site)]
            assert row["hypothesis"] == hypotheses[position]
            assert row["patched"] == {"start": patch.start[position], "end": patch.end[position], "target_frames": patch.target_frames[position]}


# ---------------------------------------------------------------- several sites patched together


def test_a_joint_site_is_one_row_per_pair_named_by_its_members_in_forward_order_and_resumes(tmp_path, generator):
    _corpus(tmp_path)
    job = _job(tmp_path, sites="encoder.layer.1 + encoder.layer.0,encoder.layer.0", pairings=("cross",))
    report = run_patching(job, show_progress=False, generator=generator)
    joint = "encoder.layer.0+encoder.layer.1"
    assert report.sites == ["encoder.layer.0", joint] and (report.todo, report.written) == (8, 8)
    rows = [row for row in _rows(job.out) if row["site"] == joint]
    assert len(rows) == 4 and {row["site_index"] for row in rows} == {2}  # its last member's: encoder.embed, layer.0, layer.1
    for row in rows:
        assert row["row_id"] == f"{row['pair']}@{joint}" and set(row["patched"]) == {"encoder.layer.0", "encoder.layer.1"}
        assert all(cell["start"] == 0 and cell["end"] > 0 for cell in row["patched"].values()) and "effect" in row["asr"]
    summary = json.loads(summary_path(job.out).read_text())
    assert list(summary["sites"]) == ["encoder.layer.0", joint] and summary["sites"][joint]["site_index"] == 2
    assert summary["sites"][joint]["pairings"]["cross"]["pairs"] == 4
    assert (tmp_path / "out" / "p.jsonl.effect.png").is_file()
    job.out.write_text(job.out.read_text()[:-40])  # a kill mid-row of the joint site: that row is redone
    again = run_patching(_job(tmp_path, sites=f"{joint},encoder.layer.1", pairings=("cross",)), show_progress=False, generator=generator)
    assert (again.todo, again.written) == (5, 5)  # the cut row, and encoder.layer.1 alone
    assert len({row["row_id"] for row in _rows(job.out)}) == len(_rows(job.out)) == 12
    with pytest.raises(SettingsMismatchError, match="frames: 'speech' vs '0:10'"):
        run_patching(_job(tmp_path, sites=joint, pairings=("cross",), frames="0:10"), show_progress=False, generator=generator)


def test_a_joint_site_whose_span_holds_no_frame_at_any_member_is_not_scored(tmp_path, generator):
    _corpus(tmp_path)
    report = run_patching(_job(tmp_path, sites="encoder.layer.0+encoder.final", pairings=("cross",), frames="5000:"), show_progress=False, generator=generator)
    rows = _rows(tmp_path / "out" / "p.jsonl")
    assert len(rows) == 4 and all(row["asr"] is None and row["unscored"] == "no frames replaced" for row in rows)
    assert report.summary["sites"]["encoder.layer.0+encoder.final"]["pairings"]["cross"]["not_patched"] == 4


def test_the_not_patched_rule_of_a_joint_row_by_hand():
    from experiments.patching.scoring import not_patched

    empty, some = {"start": 5, "end": 5, "target_frames": 3}, {"start": 0, "end": 2, "target_frames": 3}
    assert not_patched({"patched": empty}) and not not_patched({"patched": some})
    assert not_patched({"patched": {"a": empty, "b": empty}}) and not not_patched({"patched": {"a": empty, "b": some}})
    assert not not_patched({}) and not not_patched({"patched": {}})


def test_bad_joint_sites_are_refused_in_one_line(tmp_path, capsys):
    for sites, message in [
        ("encoder.layer.0+", "sites encoder.layer.0+: a joint site must join two or more different site names with +"),
        ("all+encoder.layer.0", "a joint site must join two or more"),
        ("encoder.layer.0+every:2", "a joint site must join two or more"),
        ("encoder.layer.0+encoder.layer.0", "names encoder.layer.0 twice; a joint site must"),
    ]:
        with pytest.raises(OptionError, match=message.replace("+", r"\+")):
            PatchOptions(sites=sites)
    manifest = _corpus(tmp_path)
    base = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--manifest", str(manifest), "--out", str(tmp_path / "x.jsonl")]
    assert _cli_error([*base, "--sites", "encoder.layer.0+encoder.layer.0"], capsys).startswith("error: --sites encoder.layer.0+encoder.layer.0: names")
    assert _cli_error([*base, "--sites", "encoder.layer.0+encoder.layer.9"], capsys).startswith("error: unknown site(s) encoder.layer.9 for whisper")


def test_joint_sites_resolve_beside_all_and_every_k_in_forward_order_of_their_last_member(generator):
    from experiments.patching.sites import resolve_sites

    extractor = generator.extractor  # sites: encoder.embed, encoder.layer.0, encoder.layer.1, encoder.final
    assert resolve_sites(extractor, PatchOptions(sites="every:2,encoder.final+encoder.embed").site_names()) == [
        "encoder.embed",
        "encoder.layer.1",
        "encoder.final",
        "encoder.embed+encoder.final",
    ]
    assert resolve_sites(extractor, PatchOptions(sites="all,encoder.layer.0+encoder.embed").site_names())[:3] == [
        "encoder.embed",
        "encoder.layer.0",
        "encoder.embed+encoder.layer.0",
    ]


# ---------------------------------------------------------------- a hostile user's pairs files


@pytest.mark.parametrize(
    "change, named",
    [
        ({"schema": "1"}, "schema '1' is not a whole number"),
        ({"target": ["a"]}, "target is ['a'] (list), not text"),
        ({"target_seconds": "long"}, "target_seconds is 'long' (str), not a number of seconds"),
        ({"source_seconds": True}, "source_seconds is True (bool), not a number of seconds"),
        ({"source_seconds": -1.0}, "source_seconds is -1.0 (float), not a number of seconds"),
        ({"target_speaker": None}, "target_speaker is None (NoneType), not text"),
        ({"match": "voice"}, "match 'voice' is not one of text, duration"),
    ],
)
def test_a_pairs_file_with_a_field_of_the_wrong_type_is_refused_naming_its_line(tmp_path, change, named):
    """A hand-edited pairs file: a field of the wrong type is one line naming the file, line and field
    (a string schema or a list id was a traceback; a text duration was written into the rows)."""
    utterances = [_utterance("a", "female", "F1", 1.0), _utterance("c", "male", "M1", 1.1)]
    pair = form_pairs(utterances, ["cross"])[0][0]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(pair.to_dict()) + "\n" + json.dumps({**pair.to_dict(), **change}) + "\n")
    with pytest.raises(PairsError, match=rf"p.jsonl:2: {re.escape(named)}"):
        read_pairs(path, utterances)


def test_a_pairs_file_beyond_the_limit_says_so(tmp_path, generator):
    """A pair whose utterance the manifest has, but past --limit: the line says --limit, not that the manifest lacks it."""
    _corpus(tmp_path)
    first = _job(tmp_path, sites="encoder.layer.0", pairings=("cross",))
    run_patching(first, show_progress=False, generator=generator)
    job = _job(tmp_path, sites="encoder.layer.0", pairs_file=pairs_path(first.out), limit=1)
    job = PatchJob(job.spec, job.manifest, tmp_path / "out" / "limited.jsonl", job.options)
    with pytest.raises(PairsError, match=r"p.jsonl.pairs.jsonl:1: \w+ '\w+' is not among the first 1 utterances of the manifest \(--limit 1\)"):
        run_patching(job, show_progress=False, generator=generator)
    assert not job.out.exists()


def test_a_rerun_with_another_family_is_refused_naming_the_model_not_every_decoding_setting(tmp_path, generator):
    """Another family writes to OUT: the line names the family and model and counts the other family's
    decoding settings, where it listed each of them (over a hundred keys of two generation configs)."""
    from extract.families import tiny_extractor
    from extract.families.s2t import S2TGenerator
    from tests.tiny_whisper import IdWords

    _corpus(tmp_path)
    job = _job(tmp_path, sites="encoder.layer.0", pairings=("cross",))
    run_patching(job, show_progress=False, generator=generator)
    other = PatchJob(ModelSpec("s2t", "tiny-random", device="cpu"), job.manifest, job.out, job.options)
    with pytest.raises(SettingsMismatchError) as refused:
        run_patching(other, show_progress=False, generator=S2TGenerator(tiny_extractor("s2t"), IdWords(), max_new_tokens=3))
    message = str(refused.value)
    assert "family: 'whisper' vs 's2t'" in message and "decoding." not in message
    assert re.search(r", and \d+ decoding settings of the other family\); use a new --out file$", message)


def test_a_pairing_asked_for_without_pairs_is_said(tmp_path, capsys):
    """The default --pairs asks for cross and within; a pairs file of cross pairs only (or a manifest
    with one speaker per gender) runs those, and the command says the summary will have no
    cross - within (it printed 'cross, within')."""
    manifest = _corpus(tmp_path)
    model = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--max-new-tokens", "2", "--iterations", "5", "--quiet"]
    argv = [*model, "--manifest", str(manifest), "--sites", "encoder.layer.0"]
    first = tmp_path / "first.jsonl"
    assert patch_cli.main([*argv, "--pairs", "cross", "--out", str(first)]) == 0
    capsys.readouterr()
    chosen = tmp_path / "cross.jsonl"
    chosen.write_text(pairs_path(first).read_text())
    assert patch_cli.main([*argv, "--pairs-file", str(chosen), "--out", str(tmp_path / "p.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "4 pairs (cross 4, within 0; 0 targets unpaired)" in printed
    assert f"no within pairs in --pairs-file {chosen}: the summary has no cross - within" in printed
    (tmp_path / "two").mkdir()
    two = _corpus(tmp_path / "two", speakers=(("F1", "female"), ("M1", "male")))
    assert patch_cli.main([*model, "--manifest", str(two), "--sites", "encoder.layer.0", "--out", str(tmp_path / "q.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "2 pairs (cross 2, within 0; 2 targets unpaired)" in printed
    assert "no within pairs formed (its targets are listed as unpaired in q.jsonl.pairs.jsonl): the summary has no cross - within" in printed


def test_a_joint_site_runs_on_a_padding_family_whose_later_member_needs_the_forward_pass(tmp_path):
    """ZeroSwot's post_adapter (its frames from the forward pass's mask) with a layer before it: one
    row per pair, each member's frames counted on its own (post-adapter frames are fewer than the layer's)."""
    manifest = _corpus(tmp_path)
    options = PatchOptions(sites="post_adapter+encoder.layer.0", pairings=("cross",), task="st", tgt_lang="es", max_new_tokens=4, iterations=10)
    job = PatchJob(ModelSpec("zeroswot", "tiny-random", device="cpu"), manifest, tmp_path / "out" / "p.jsonl", options)
    report = run_patching(job, show_progress=False, generator=_zeroswot_generator())
    rows = _rows(job.out)
    assert report.sites == ["encoder.layer.0+post_adapter"] and len(rows) == 4
    for row in rows:
        layer, adapter = row["patched"]["encoder.layer.0"], row["patched"]["post_adapter"]
        assert 0 < adapter["target_frames"] < layer["target_frames"] and layer["end"] > 0 and adapter["end"] > 0
        assert row["gender_margin"] == {"scored": False, "reason": "zeroswot's decoder is a separate model: no teacher-forced scores"}


def test_all_and_every_k_choose_the_patchable_sites_and_a_derived_site_named_is_refused():
    """ZeroSwot's table ends with a derived view (post_adapter_no_special): --sites all and every:K
    choose among the sites a patch can overwrite (they were refused whole for it), while the derived
    site named, alone or in a joint site, is refused in one line."""
    from experiments.patching.sites import resolve_sites
    from extract.families import tiny_extractor
    from extract.patching import PatchError

    extractor = tiny_extractor("zeroswot")  # encoder.layer.0, encoder.layer.1, pre_adapter, post_adapter, post_adapter_no_special
    assert resolve_sites(extractor, PatchOptions(sites="all").site_names()) == ["encoder.layer.0", "encoder.layer.1", "pre_adapter", "post_adapter"]
    assert resolve_sites(extractor, PatchOptions(sites="every:2").site_names()) == ["encoder.layer.0", "pre_adapter", "post_adapter"]
    assert resolve_sites(extractor, PatchOptions(sites="all,pre_adapter+post_adapter").site_names())[-1] == "pre_adapter+post_adapter"
    for sites in ("post_adapter_no_special", "post_adapter+post_adapter_no_special"):
        with pytest.raises(PatchError, match="post_adapter_no_special is a derived view"):
            resolve_sites(extractor, PatchOptions(sites=sites).site_names())


# ---------------------------------------------------------------- components, directions, the graded metric in a run


def test_a_denoising_run_runs_the_source_with_the_target_s_states_and_scores_the_target_s_reference(tmp_path, generator):
    manifest = _corpus(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["text"] = "a dog ran"  # f1's reference differs from the others'
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = run_patching(_job(tmp_path, sites="encoder.layer.0", component="attention", direction="denoising"), show_progress=False, generator=generator)
    written = _rows(tmp_path / "out" / "p.jsonl")
    assert report.written == 8 and {row["component"] for row in written} == {"attention"} and {row["direction"] for row in written} == {"denoising"}
    audio = {row["id"]: soundfile.read(row["audio"], dtype="float32")[0] for row in rows}
    for row in written:
        assert row["runs_on"] == row["source"]
        assert row["plain_hypothesis"] == generator.generate([audio[row["source"]]], "en", "asr")[0]
        assert row["reference"] == ("a dog ran" if row["target"] == "f1" else "the cat sat")
        assert row["logprob"]["scored"] and row["logprob"]["tokens"] == 3
    f1 = next(row for row in written if row["target"] == "f1")
    from extract.forced import generate_scored

    plain = generate_scored(generator, [audio[f1["source"]]], "en", "asr", None, [["a dog ran"]]).texts[0][0]
    assert f1["logprob"]["plain"] == pytest.approx(plain.mean)  # the source's plain run, scored against the target's reference
    settings = json.loads((tmp_path / "out" / "p.jsonl.settings.json").read_text())
    assert (settings["component"], settings["direction"]) == ("attention", "denoising")
    assert report.summary["sites"]["encoder.layer.0"]["metrics"]["logprob"]["unit"] == "nats per token"
    with pytest.raises(SettingsMismatchError, match="direction: 'denoising' vs 'noising'"):
        run_patching(_job(tmp_path, sites="encoder.layer.0", component="attention"), show_progress=False, generator=generator)


def test_a_self_patch_of_a_component_changes_no_score(tmp_path, generator):
    """A pairs file whose source is the target's own utterance cannot be written (a source is another
    speaker), so the identity is checked on the run's own hook: every component at every layer, the
    target's states into itself, leaves the hypothesis and the graded score bit for bit."""
    from extract.forced import generate_scored
    from extract.patching import capture_sources, patched_together

    audios = [soundfile.read(path, dtype="float32")[0] for path in sorted((_corpus(tmp_path).parent).glob("*.wav"))]
    texts = [["the cat sat"]] * len(audios)
    plain = generate_scored(generator, audios, "en", "asr", None, texts)
    for component in ("residual", "attention", "mlp"):
        sources = capture_sources(generator.extractor, audios, ["encoder.layer.1"], None, component=component)
        scored, _ = patched_together(
            generator, ["encoder.layer.1"], audios, sources, "en", "asr", None, component=component,
            generate=lambda inputs: generate_scored(generator, inputs, "en", "asr", None, texts),
        )  # fmt: skip
        assert scored.hypotheses == plain.hypotheses and scored.texts == plain.texts, component


def test_component_options_choose_layers_and_refuse_a_site_without_the_block(tmp_path, generator, capsys):
    from experiments.patching.sites import resolve_sites

    assert resolve_sites(generator.extractor, "all", "mlp") == ["encoder.layer.0", "encoder.layer.1"]
    manifest = _corpus(tmp_path)
    base = ["--family", "whisper", "--checkpoint", "tiny-random", "--device", "cpu", "--manifest", str(manifest), "--max-new-tokens", "2"]
    error = _cli_error([*base, "--component", "mlp", "--sites", "encoder.final", "--out", str(tmp_path / "x.jsonl")], capsys)
    assert (
        error
        == "error: site encoder.final has no mlp block of its own: --component mlp patches encoder.layer.K sites; patch encoder.final with --component residual"
    )
    assert "invalid choice: 'ffn'" in _cli_usage_error([*base, "--component", "ffn", "--out", str(tmp_path / "x.jsonl")], capsys)


def _cli_usage_error(argv, capsys):
    with pytest.raises(SystemExit):
        patch_cli.main(argv)
    return capsys.readouterr().err


def test_a_translation_run_scores_the_gender_margin_of_the_reference(tmp_path, generator):
    manifest = _corpus(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    for row in rows:
        female = row["gender"] == "female"
        row["translation"] = "I am tired." if female else "I am worn."
        row["extra"] = {"category": "1F" if female else "1M", "genderterms": "tired worn" if female else "worn tired"}
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = run_patching(_job(tmp_path, sites="encoder.layer.1", task="st", tgt_lang="en"), show_progress=False, generator=generator)
    written = _rows(tmp_path / "out" / "p.jsonl")
    assert report.written == 8
    for row in written:
        margin = row["gender_margin"]
        assert margin["scored"] and margin["terms"] == 1 and margin["effect"] == pytest.approx(margin["patched"] - margin["plain"])
    entry = report.summary["sites"]["encoder.layer.1"]
    assert entry["primary"] == "gender_margin" and entry["pairings"]["cross"]["scored"] == 4 and entry["match_used"] == "text"
