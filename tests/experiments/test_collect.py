"""``experiments.collect``: probe rows joined with behaviour results by model label, dataset and
language (never by path), end to end from synthetic stores and hand-made hypotheses; the joins'
refusals (two records of one key, files without their subject) and the unmatched keys it lists;
``correlate --where`` and ``figures heatmap --long`` on its tables."""

import csv
import json

import pytest

from experiments.collect import main as collect_main
from experiments.correlate import main as correlate_main
from experiments.figures import main as figures_main
from experiments.results.multiple_testing import benjamini_hochberg
from experiments.scoring.gaps import gap_report, read_hypotheses, save_gap_report
from extract.provenance import file_sha256
from probing.grid import run_all
from probing.results import load_rows
from probing.run import ProbeConfig
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"
MANIFEST_SHA = "ab" * 32
STRENGTHS = {"en": 3.0, "it": 1.0, "es": 0.4}  # gender signal in each language's store


def _store(folder, language, label="wl", random_init=False, strength=3.0):
    config = {"label": label, "checkpoint": "openai/whisper-large-v3", "revision": None, "random_init": random_init, "manifest_sha256": MANIFEST_SHA}
    return write_store(
        folder,
        speakers_per_gender=5,
        utterances_per_speaker=4,
        length_range=(8, 12),
        strength=strength,
        language=language,
        dataset="cv",
        attributes={"family": "whisper", "config": config},
    )


def _hypotheses(path, model, languages, extra_errors):
    """Transcription rows of ``model``: four speakers per gender, three utterances each; female
    utterances get ``extra_errors[language]`` more word errors than male ones."""
    rows = []
    for language in languages:
        for gender in ("female", "male"):
            for speaker in range(4):
                for utterance in range(3):
                    words = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
                    errors = 1 + (speaker + utterance) % 2 + (extra_errors[language] if gender == "female" else 0)
                    hypothesis = ["x"] * errors + words[errors:]
                    rows.append(
                        {
                            "id": f"{language}-{gender}-{speaker}-{utterance}",
                            "reference": " ".join(words),
                            "hypothesis": " ".join(hypothesis),
                            "gender": gender,
                            "speaker": f"{language}-{gender}-{speaker}",
                            "language": language,
                            "model": model,
                            "task": "asr",
                            "tgt_lang": language,
                            "dataset": "cv",
                        }
                    )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _gap(tmp_path, model="wl", languages=("en", "it", "es"), name="gap.json", compare="relative_gap"):
    hypotheses = _hypotheses(tmp_path / f"{name}.hyps.jsonl", model, languages, {"en": 3, "it": 2, "es": 1})
    report, counts = gap_report(read_hypotheses(hypotheses), ("female", "male"), iterations=50, seed=0, hypotheses=hypotheses, compare=compare)
    save_gap_report(report, counts, tmp_path / name)
    return tmp_path / name


def _read_csv(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Three language stores of model ``wl``, a random-init store, their positional probes (two seeds
    on English), and one gap report over the three languages."""
    root = tmp_path_factory.mktemp("study")
    configs = [
        ProbeConfig(str(_store(root / "stores" / f"wl-{language}", language, strength=STRENGTHS[language])), SITE, positions=8) for language in STRENGTHS
    ]
    configs.append(ProbeConfig(str(root / "stores" / "wl-en"), SITE, positions=8, seed=1))
    random_store = _store(root / "stores" / "wl-random-en", "en", label="wl-random", random_init=True, strength=0.0)
    configs.append(ProbeConfig(str(random_store), SITE, positions=8))
    configs.append(ProbeConfig(str(root / "stores" / "wl-en"), SITE, positions=8, control="shuffled"))
    run_all(configs, root / "probes.jsonl")
    return root, configs, _gap(root)


def test_f1_vs_gap_joins_each_language_by_model_dataset_and_language(study, capsys):
    root, configs, gap = study
    out = root / "collected"
    assert collect_main(["--probes", str(root / "probes.jsonl"), "--gaps", str(gap), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 f1_vs_gap rows" in printed and "unmatched: 1 probes without gap" in printed
    table = _read_csv(out / "f1_vs_gap.csv")
    assert ",".join(table[0]) == (  # the header users read: a contract, spelled out
        "model,dataset,language,site,site_index,site_role,task,split,f1_s,seeds,gap_relative,gap_estimate,ci95_low,ci95_high,ci95_of,probe_runs,gap_source,"
        "f1_control_shuffled,selectivity_shuffled,f1_control_speaker,selectivity_speaker"
    )
    assert {row["split"] for row in table} == {"fixed"}
    rows = {row["language"]: row for row in table}
    probes, report = load_rows(root / "probes.jsonl"), json.loads(gap.read_text())
    assert set(rows) == {"en", "it", "es"}
    for language, row in rows.items():
        runs = [config.run_id() for config in configs if config.store.endswith(f"wl-{language}") and config.control == "none"]
        entry = report["languages"][language]
        assert (row["model"], row["dataset"], row["site"], row["task"]) == ("wl", "cv", SITE, "female-male")
        assert float(row["f1_s"]) == pytest.approx(sum(probes[run]["f1_s"] for run in runs) / len(runs))
        assert row["seeds"] == " ".join(str(probes[run]["seed"]) for run in runs) and row["probe_runs"] == " ".join(runs)
        assert float(row["gap_relative"]) == pytest.approx(entry["gap_relative"]) and row["gap_estimate"] == "resampled"
        assert [float(row["ci95_low"]), float(row["ci95_high"])] == pytest.approx(entry["bootstrap"]["ci95"]) and row["ci95_of"] == "relative_gap"
    assert rows["en"]["seeds"] == "0 1"  # F1_S averaged over the two seeds
    assert all(float(row["gap_relative"]) > 0 for row in rows.values())  # female utterances have more errors
    assert report["schema"] == 1 and (report["subject"]["model"], report["subject"]["dataset"], report["subject"]["languages"]) == (
        "wl",
        "cv",
        ["en", "es", "it"],
    )
    assert report["inputs"] == [{"path": str(gap) + ".hyps.jsonl", "sha256": file_sha256(str(gap) + ".hyps.jsonl")}]
    summary = json.loads((out / "collect.json").read_text())
    assert [item["model"] for item in summary["unmatched"]["probes_without_gap"]] == ["wl-random"]
    assert summary["unmatched"]["gaps_without_probe"] == []
    assert {entry["path"] for entry in summary["inputs"]} == {str(root / "probes.jsonl"), str(gap)}
    long = _read_csv(out / "long.csv")
    control = [r for r in long if r["control"] == "shuffled" and r["metric"] == "selectivity"]
    assert len(control) == 1 and control[0]["model"] == "wl" and control[0]["language"] == "en"
    (shuffled,) = [probes[config.run_id()] for config in configs if config.control == "shuffled"]
    assert float(rows["en"]["f1_control_shuffled"]) == pytest.approx(shuffled["f1_s"])  # the control's F1_S beside the probe's
    assert float(rows["en"]["selectivity_shuffled"]) == pytest.approx(shuffled["selectivity"])
    assert shuffled["selectivity"] == pytest.approx(shuffled["f1_real"] - shuffled["f1_s"])
    assert rows["en"]["f1_control_speaker"] == rows["en"]["selectivity_speaker"] == ""  # no speaker control was run
    assert all(rows[language]["f1_control_shuffled"] == rows[language]["selectivity_shuffled"] == "" for language in ("it", "es"))
    p_rows = [r for r in long if r["metric"] == "p_value"]
    assert {r["kind"] for r in p_rows} == {"asr_gap"} and len(p_rows) == 3
    q = benjamini_hochberg([float(r["value"]) for r in p_rows])  # one family: the gap p-values of every language
    assert [float(r["q_value"]) for r in p_rows] == pytest.approx(q)
    assert all(r["q_value"] == "" for r in long if r["metric"] != "p_value")
    gap_rows = {r["language"]: float(r["value"]) for r in long if r["kind"] == "asr_gap" and r["metric"] == "gap_relative"}
    assert gap_rows == pytest.approx({language: report["languages"][language]["gap_relative"] for language in ("en", "it", "es")})


def test_an_interval_of_another_comparison_is_named_in_the_tables(study, tmp_path):
    """A gap report whose speaker interval is of Δrel (``asr_gap --interval-of delta_rel``): the
    joined rows say so in ``ci95_of``, and long.csv names the interval's metrics after it."""
    root, _, _ = study
    gap = _gap(tmp_path, compare="delta_rel")
    assert collect_main(["--probes", str(root / "probes.jsonl"), "--gaps", str(gap), "--out", str(tmp_path / "out")]) == 0
    report = json.loads(gap.read_text())["languages"]
    rows = {row["language"]: row for row in _read_csv(tmp_path / "out" / "f1_vs_gap.csv")}
    assert {row["ci95_of"] for row in rows.values()} == {"delta_rel"}
    assert [float(rows["en"]["ci95_low"]), float(rows["en"]["ci95_high"])] == pytest.approx(report["en"]["bootstrap"]["ci95"])
    metrics = {r["metric"] for r in _read_csv(tmp_path / "out" / "long.csv") if r["kind"] == "asr_gap" and r["language"] == "en"}
    assert {"ci95_low.delta_rel", "ci95_high.delta_rel"} <= metrics and "ci95_low" not in metrics


def test_correlate_and_heatmap_read_the_collected_tables(study, tmp_path):
    root, configs, gap = study
    out = tmp_path / "collected"
    assert collect_main(["--probes", str(root / "probes.jsonl"), "--gaps", str(gap), "--out", str(out)]) == 0
    argv = ["--table", str(out / "f1_vs_gap.csv"), "--where", f"site={SITE}", "--where", "model=wl", "--x", "f1_s", "--y", "gap_relative"]
    assert correlate_main([*argv, "--label", "model,language", "--bootstrap", "100", "--out", str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["n"] == 3 and result["where"] == {"site": SITE, "model": "wl"}
    assert correlate_main([*argv[:2], "--where", "site=encoder.final", *argv[6:], "--out", str(tmp_path / "none.json")]) == 2  # no rows left
    figure = tmp_path / "heatmap"
    assert (
        figures_main(["heatmap", "--long", str(out / "long.csv"), "--label", "wl", "--random-label", "wl-random", "--language", "en", "--out", str(figure)])
        == 0
    )
    assert figure.with_suffix(".png").stat().st_size > 2000


def _probe_row(run_id, model="m", language="en", site=SITE, seed=0, positions=8, probe="positional", applied=None, family=None, control="none", **scores):
    config = {"store": f"stores/{run_id}", "site": site, "probe": probe, "control": control, "seed": seed, "positions": positions, "task": "female-male"}
    row = {
        "schema": 1,
        "run_id": run_id,
        "store_identity": "s",
        "subject": {"model": model, "dataset": "cv", "language": language} | ({"family": family} if family else {}),
        "site_index": 0 if site == SITE else 1,
        "config": config,
        "seed": seed,
    }
    if applied:
        row["applied_to"] = {"store": "stores/mustshe", "subject": {"dataset": "must_she", "manifest_sha256": applied}}
    return row | scores


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _run_collect(argv, capsys):
    status = collect_main([str(a) for a in argv])
    return status, capsys.readouterr().err.strip()


def test_two_probe_rows_of_one_key_are_one_line_naming_both(tmp_path, capsys):
    first = _write_rows(tmp_path / "a.jsonl", [_probe_row("r1", f1_s=70.0)])
    second = _write_rows(tmp_path / "b.jsonl", [_probe_row("r0", model="n", f1_s=60.0), _probe_row("r2", positions=6, f1_s=71.0)])
    status, error = _run_collect(["--probes", first, second, "--gaps", _gap(tmp_path, model="m"), "--out", tmp_path / "out"], capsys)
    assert status == 2 and len(error.splitlines()) == 1, error
    assert error.startswith("error: two probe rows claim (model m, dataset cv, language en, site encoder.layer.0, probe positional")
    assert f"{first}:1 (run r1) and {second}:2 (run r2)" in error and "positions: 8 vs 6" in error
    assert not (tmp_path / "out" / "f1_vs_gap.csv").exists()


def test_two_gap_reports_of_one_model_dataset_and_language_exit_2(tmp_path, capsys):
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("r1", f1_s=70.0)])
    one, other = _gap(tmp_path, model="m", languages=("en",), name="g1.json"), _gap(tmp_path, model="m", languages=("en",), name="g2.json")
    status, error = _run_collect(["--probes", probes, "--gaps", one, other, "--out", tmp_path / "out"], capsys)
    assert (
        status == 2
        and error
        == f"error: two gap reports claim (model m, dataset cv, language en, task female-male): {one} and {other}; keep one (or give them different labels)"
    )


def test_unmatched_keys_are_listed_and_old_rows_left_out(tmp_path, capsys):
    old = {"run_id": "old", "config": {"store": "s", "site": SITE}, "f1_s": 1.0}  # written before rows recorded their subject
    probes = _write_rows(tmp_path / "p.jsonl", [old, _probe_row("r1", f1_s=70.0), _probe_row("r2", model="other", f1_s=65.0)])
    gap = _gap(tmp_path, model="m", languages=("en", "it"))
    assert collect_main(["--probes", str(probes), "--gaps", str(gap), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "unmatched: 1 probes without gap, 1 gaps without probe" in printed and "1 probe rows left out" in printed
    summary = json.loads((tmp_path / "out" / "collect.json").read_text())
    assert summary["unmatched"]["probes_without_gap"] == [
        {"model": "other", "dataset": "cv", "language": "en", "site": SITE, "task": "female-male", "split": "fixed", "runs": "r2"}
    ]
    assert summary["unmatched"]["gaps_without_probe"] == [{"model": "m", "dataset": "cv", "language": "it", "task": "female-male", "source": str(gap)}]
    assert summary["skipped_probe_rows"][0]["source"] == f"{probes}:1"
    assert [row["language"] for row in _read_csv(tmp_path / "out" / "f1_vs_gap.csv")] == ["en"]


def test_a_gap_report_without_subject_is_refused(tmp_path, capsys):
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("r1", f1_s=70.0)])
    old = tmp_path / "old-gap.json"
    old.write_text(json.dumps({"settings": {"groups": ["female", "male"]}, "languages": {}}))
    status, error = _run_collect(["--probes", probes, "--gaps", old, "--out", tmp_path / "out"], capsys)
    assert status == 2 and error.startswith(f"error: {old}: no subject (written before asr_gap recorded") and "rerun python -m experiments.asr_gap" in error


def _mustshe(path, model, manifest, accuracy):
    document = {"schema": 1, "subject": {"model": model, "tgt_lang": "es", "manifest_sha256": manifest}, "category_1": {"accuracy": accuracy, "coverage": 50.0}}
    path.write_text(json.dumps(document))
    return path


def test_f1_vs_mustshe_joins_the_probe_applied_to_the_same_manifest(tmp_path, capsys):
    rows = [
        _probe_row("a1", probe="attention", applied="1" * 64, applied_f1_macro=80.0),
        _probe_row("a2", probe="attention", applied="2" * 64, applied_f1_macro=60.0),  # applied to another direction's store
        _probe_row("a3", probe="attention", site="encoder.final", applied="1" * 64, applied_f1_macro=90.0, seed=0),
        _probe_row("a4", probe="attention", site="encoder.final", applied="1" * 64, applied_f1_macro=70.0, seed=1),
    ]
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    mustshe = _mustshe(tmp_path / "ms.json", "m", "1" * 64, 62.5)
    argv = ["--probes", probes, "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--mustshe", mustshe, "--out", tmp_path / "out"]
    assert collect_main([str(a) for a in argv]) == 0
    table = _read_csv(tmp_path / "out" / "f1_vs_mustshe.csv")
    assert list(table[0])[:7] == ["model", "site", "site_index", "site_role", "split", "tgt_lang", "applied_f1_macro"]
    assert [(r["site"], r["tgt_lang"], float(r["applied_f1_macro"]), r["seeds"], float(r["category_1_accuracy"])) for r in table] == [
        (SITE, "es", 80.0, "0", 62.5),
        ("encoder.final", "es", 80.0, "0 1", 62.5),
    ]
    unmatched = json.loads((tmp_path / "out" / "collect.json").read_text())["unmatched"]["applied_probes_without_mustshe"]
    assert [item["runs"] for item in unmatched] == ["a2"]
    capsys.readouterr()
    status, error = _run_collect([*argv[:4], "--mustshe", _mustshe(tmp_path / "ms-none.json", "m", None, 62.5), "--out", tmp_path / "out2"], capsys)
    assert status == 2 and "applied to two stores" in error and "records no manifest" in error


def test_f1_vs_mustshe_carries_each_controls_applied_f1_and_the_selectivity(tmp_path, capsys):
    """Seeds 0 and 1 of the real probe apply at 80 and 70 (mean 75); the shuffled control's seeds at 52 and 48
    (mean 50): selectivity 75 - 50 = 25. The speaker control at 58: 75 - 58 = 17. Another site has no control."""
    applied = "1" * 64
    rows = [
        _probe_row("r0", probe="attention", applied=applied, applied_f1_macro=80.0, seed=0),
        _probe_row("r1", probe="attention", applied=applied, applied_f1_macro=70.0, seed=1),
        _probe_row("s0", probe="attention", applied=applied, applied_f1_macro=52.0, seed=0, control="shuffled", selectivity=30.0),
        _probe_row("s1", probe="attention", applied=applied, applied_f1_macro=48.0, seed=1, control="shuffled", selectivity=30.0),
        _probe_row("k0", probe="attention", applied=applied, applied_f1_macro=58.0, seed=0, control="speaker", selectivity=3.0),
        _probe_row("f0", probe="attention", site="encoder.final", applied=applied, applied_f1_macro=90.0),
    ]
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    assert collect_main([str(a) for a in ["--probes", probes, "--mustshe", _mustshe(tmp_path / "ms.json", "m", applied, 62.5), "--out", tmp_path / "o"]]) == 0
    table = {row["site"]: row for row in _read_csv(tmp_path / "o" / "f1_vs_mustshe.csv")}
    row = table[SITE]
    assert float(row["applied_f1_macro"]) == 75.0 and row["seeds"] == "0 1"  # the controls are not averaged into the probe's F1
    assert (float(row["f1_control_shuffled"]), float(row["selectivity_shuffled"])) == (50.0, 25.0)
    assert (float(row["f1_control_speaker"]), float(row["selectivity_speaker"])) == (58.0, 17.0)
    assert all(table["encoder.final"][column] == "" for column in ("f1_control_shuffled", "selectivity_shuffled", "f1_control_speaker"))
    assert json.loads((tmp_path / "o" / "collect.json").read_text())["unmatched"]["applied_probes_without_mustshe"] == []
    capsys.readouterr()


# --- collect knows what it reads: each document's kind, each probe row's keys (hostile-input round 3) ---


def _gap_as_other_kind(tmp_path, flag, capsys):
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("r1", f1_s=70.0)])
    gap = _gap(tmp_path, model="m", languages=("en",))
    return gap, _run_collect(["--probes", probes, "--gaps", gap, flag, gap, "--out", tmp_path / "out"], capsys)


@pytest.mark.parametrize("flag", ["--mustshe", "--winomt"])
def test_a_gap_report_given_as_another_kind_is_refused(tmp_path, capsys, flag):
    gap, (status, error) = _gap_as_other_kind(tmp_path, flag, capsys)
    assert json.loads(gap.read_text())["kind"] == "asr_gap"
    assert status == 2 and error == f"error: {gap}: given as {flag}, but it is a asr_gap result; give it as --gaps"
    assert not (tmp_path / "out").exists()


def test_a_mustshe_result_given_as_gaps_is_refused_by_its_content_without_a_kind(tmp_path, capsys):
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("r1", f1_s=70.0)])
    mustshe = _mustshe(tmp_path / "ms.json", "m", "1" * 64, 62.5)  # no kind recorded: written before documents recorded it
    status, error = _run_collect(["--probes", probes, "--gaps", mustshe, "--out", tmp_path / "out"], capsys)
    assert status == 2 and error == f"error: {mustshe}: given as --gaps, but it is a mustshe result; give it as --mustshe"


def test_a_gap_report_without_languages_is_refused(tmp_path, capsys):
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("r1", f1_s=70.0)])
    gap = _gap(tmp_path, model="m", languages=("en",))
    document = json.loads(gap.read_text())
    del document["languages"], document["kind"]
    gap.write_text(json.dumps(document))
    status, error = _run_collect(["--probes", probes, "--gaps", gap, "--out", tmp_path / "out"], capsys)
    assert status == 2 and error == f"error: {gap}: given as --gaps, but it is no asr_gap result (it holds no 'languages')"


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda row: row["subject"].pop("model"), "no subject.model"),
        (lambda row: row["config"].pop("site"), "no config.site"),
        (lambda row: row.update(f1_s="99"), "f1_s is '99' (str), not a number"),
    ],
)
def test_a_malformed_probe_row_is_one_line_naming_file_and_line(tmp_path, capsys, edit, named):
    rows = [_probe_row("r0", f1_s=60.0, site="encoder.final"), _probe_row("r1", f1_s=70.0)]
    edit(rows[1])
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    status, error = _run_collect(["--probes", probes, "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--out", tmp_path / "out"], capsys)
    assert status == 2 and error.startswith(f"error: {probes}:2: ") and named in error and "\n" not in error


def test_a_probes_file_that_is_not_utf8_is_one_line_naming_the_line(tmp_path, capsys):
    probes = tmp_path / "p.jsonl"
    probes.write_bytes(
        json.dumps(_probe_row("r0", f1_s=60.0)).encode() + b"\n" + json.dumps(_probe_row("r1", f1_s=70.0)).replace("r1", "w\xe9").encode("latin-1")
    )
    status, error = _run_collect(["--probes", probes, "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--out", tmp_path / "out"], capsys)
    assert status == 2 and error.startswith(f"error: {probes}:2: not UTF-8")


def test_a_folder_given_as_probes_is_named_a_folder(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    status, error = _run_collect(["--probes", tmp_path / "d", "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--out", tmp_path / "out"], capsys)
    assert status == 2 and error == f"error: {tmp_path / 'd'}: a folder; give the result files in it"


SITE_ROLES = {  # family -> site -> the role its tables name
    "whisper": {"encoder.final": "final", "encoder.layer.3": "layer", "encoder.embed": "layer", "decoder.layer.0": "decoder", "decoder.final": "decoder"},
    "s2t": {"encoder.final": "final", "decoder.final": "decoder"},
    "seamless": {"post_adapter": "final", "pre_adapter": "pre_adapter", "encoder.layer.23": "layer"},
    "zeroswot": {"post_adapter": "final", "pre_adapter": "pre_adapter", "post_adapter_no_special": "final_variant"},
    "praat": {"f0": "baseline"},
    None: {"encoder.final": ""},  # a store that records no family: an empty cell, never a guess
}


@pytest.mark.parametrize(("family", "site", "role"), [(family, site, role) for family, roles in SITE_ROLES.items() for site, role in roles.items()])
def test_every_table_names_the_site_role_from_the_family_site_table(tmp_path, capsys, family, site, role):
    rows = [
        _probe_row("p1", site=site, family=family, f1_s=70.0),
        _probe_row("a1", probe="attention", site=site, family=family, applied="1" * 64, applied_f1_macro=80.0),
    ]
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    argv = ["--probes", probes, "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--mustshe", _mustshe(tmp_path / "ms.json", "m", "1" * 64, 62.5)]
    assert collect_main([str(a) for a in [*argv, "--out", tmp_path / "out"]]) == 0
    (gap_row,), (mustshe_row,) = _read_csv(tmp_path / "out" / "f1_vs_gap.csv"), _read_csv(tmp_path / "out" / "f1_vs_mustshe.csv")
    assert gap_row["site_role"] == role and mustshe_row["site_role"] == role
    long = _read_csv(tmp_path / "out" / "long.csv")
    assert {r["site_role"] for r in long if r["kind"] == "probe"} == {role} and {r["site_role"] for r in long if r["kind"] != "probe"} == {""}


def test_each_family_declares_roles_of_sites_in_its_table_and_one_final_site():
    from extract.families import FAMILIES
    from extract.families.base import SITE_ROLES

    for name, family in FAMILIES.items():
        table = family.tiny_extractor().site_table()
        assert set(family.site_roles) <= set(table), name
        assert len([site for site in table if family.site_role(site) == "final"]) == 1, name  # a model counts once among final sites
        assert {family.site_role(site) for site in table} <= set(SITE_ROLES), name
    assert FAMILIES["seamless"].site_role("post_adapter") == "final" and FAMILIES["whisper"].site_role("encoder.final") == "final"


def test_collect_takes_mustshe_without_gaps_and_gaps_without_mustshe(tmp_path, capsys):
    rows = [
        _probe_row("p1", family="seamless", site="post_adapter", f1_s=70.0),
        _probe_row("a1", probe="attention", family="seamless", site="post_adapter", applied="1" * 64, applied_f1_macro=80.0),
    ]
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    mustshe = _mustshe(tmp_path / "ms.json", "m", "1" * 64, 62.5)
    assert collect_main([str(a) for a in ["--probes", probes, "--mustshe", mustshe, "--out", tmp_path / "ms"]]) == 0
    assert [(r["site_role"], r["category_1_accuracy"]) for r in _read_csv(tmp_path / "ms" / "f1_vs_mustshe.csv")] == [("final", "62.5")]
    assert _read_csv(tmp_path / "ms" / "f1_vs_gap.csv") == []
    gap = _gap(tmp_path, model="m", languages=("en",))
    assert collect_main([str(a) for a in ["--probes", probes, "--gaps", gap, "--out", tmp_path / "gap"]]) == 0
    assert [r["site_role"] for r in _read_csv(tmp_path / "gap" / "f1_vs_gap.csv")] == ["final"]
    assert _read_csv(tmp_path / "gap" / "f1_vs_mustshe.csv") == []


def test_a_stratified_and_a_fixed_split_probe_are_two_rows_of_the_tables_never_averaged(tmp_path, capsys):
    stratified = _probe_row("s1", f1_s=90.0) | {"config": _probe_row("s1")["config"] | {"split": "stratified"}}
    loso = _probe_row("l1", f1_s=10.0) | {"config": _probe_row("l1")["config"] | {"split": "loso"}}
    probes = _write_rows(tmp_path / "p.jsonl", [_probe_row("f1", f1_s=70.0), stratified, loso])
    assert collect_main([str(a) for a in ["--probes", probes, "--gaps", _gap(tmp_path, model="m", languages=("en",)), "--out", tmp_path / "out"]]) == 0
    table = _read_csv(tmp_path / "out" / "f1_vs_gap.csv")
    assert [(row["split"], float(row["f1_s"])) for row in table] == [("fixed", 70.0), ("stratified", 90.0)]  # loso: long.csv only
    assert table[0]["gap_relative"] == table[1]["gap_relative"]


def test_loso_rows_reach_f1_vs_gap_where_no_fixed_row_exists_and_are_never_averaged_with_one(tmp_path, capsys):
    """The docs recommend leave-one-speaker-out for small corpora: a probe scored that way only joins
    its gap (split loso); a key scored both ways keeps its fixed rows."""

    def loso(run_id, **kwargs):
        row = _probe_row(run_id, **kwargs)
        row["config"]["split"] = "loso"
        return row

    rows = [loso("l-en", f1_s=60.0), _probe_row("f-it", language="it", f1_s=70.0), loso("l-it", language="it", f1_s=10.0)]
    probes = _write_rows(tmp_path / "p.jsonl", rows)
    gap = _gap(tmp_path, model="m", languages=("en", "it"))
    assert collect_main(["--probes", str(probes), "--gaps", str(gap), "--out", str(tmp_path / "out")]) == 0
    assert "2 f1_vs_gap rows" in capsys.readouterr().out
    table = _read_csv(tmp_path / "out" / "f1_vs_gap.csv")
    assert [(row["language"], row["split"], float(row["f1_s"]), row["probe_runs"]) for row in table] == [
        ("en", "loso", 60.0, "l-en"),
        ("it", "fixed", 70.0, "f-it"),
    ]


def test_a_full_disk_while_collecting_names_the_file_and_keeps_the_tables_of_the_run_before(study, capsys, monkeypatch):
    """Hostile-input round 3, #163: the tables are written all or none (temporary names, renamed once whole)."""
    import errno

    from experiments.results import collect as library

    root, _, gap = study
    out = root / "collected"
    argv = ["--probes", str(root / "probes.jsonl"), "--gaps", str(gap), "--out", str(out)]
    assert collect_main(argv) == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    real = library.write_csv

    def full_at_long(rows, columns, path):
        if path.name.startswith(".long.csv"):
            path.write_text("half a ta")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real([], columns, path)  # the other tables of this run differ from the run before

    monkeypatch.setattr(library, "write_csv", full_at_long)
    capsys.readouterr()
    assert collect_main(argv) == 2
    error = capsys.readouterr().err.strip()
    kept = "no table of this run was written; the folder keeps the tables it had"
    assert error == f"error: disk full while writing {out / 'long.csv'}: free space and rerun; {kept}"
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
