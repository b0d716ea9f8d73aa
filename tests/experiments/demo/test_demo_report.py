"""The demo report's pieces from hand-made result dictionaries (fast: no synthesis, no model)."""

import pytest
import torch

from experiments.demo.__main__ import main
from experiments.demo.pipeline import report_folder, set_threads, work_root
from experiments.demo.report import average_test_length, gap_estimate_name, gap_table, mdl_lines


def _entry(gap, ci, p, estimate="resampled", female=6.7, male=2.9):
    return {
        "metric": "wer",
        "groups": {"female": {"error_rate": female}, "male": {"error_rate": male}},
        "gap_relative": gap,
        "gap_estimate": estimate,
        "gap_relative_full": gap + 1.0,
        "gap_relative_resampled": gap,
        "bootstrap": {"ci95": ci, "p_value": p, "iterations": 1000},
    }


def test_gap_table_leads_with_the_bootstrap_interval_and_names_the_estimate():
    gaps = {"whisper-base": {"languages": {"en": _entry(131.2, [-57.7, 716.7], 0.0), "es": _entry(48.3, [31.2, 70.4], 0.03, estimate="full")}}}
    lines = gap_table(gaps)
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header.index("E(F, M) 95 % CI (speaker bootstrap)") < header.index("E(F, M)") < header.index("estimate")
    assert header[-1] == "p, published resampling t-test (pseudo-replicated)"
    en = [cell.strip() for cell in lines[2].strip("|").split("|")]
    es = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert en == [
        "whisper-base",
        "en",
        "WER",
        "6.70",
        "2.90",
        "-57.7 .. 716.7 (crosses 0)",
        "131.2",
        "E on the resampled means (Attanasio et al. 2024)",
        "< 1e-4",
    ]
    assert es[5:] == ["31.2 .. 70.4", "48.3", "E on the full set", "0.03"]
    note = " ".join(lines[4:])
    assert "pseudo-replication" in note and "crosses 0" in note


def test_an_interval_from_too_few_speakers_says_so():
    entry = _entry(43.7, [29.0, 68.0], 0.0)
    entry["bootstrap"] |= {"speakers": {"female": 4, "male": 4}, "ci95_note": "only 4 speakers in a group"}
    row = gap_table({"m": {"languages": {"es": entry}}})[2]
    assert "| 29.0 .. 68.0 (unreliable: 4 / 4 speakers) |" in row


def test_an_interval_touching_zero_crosses_it_and_a_missing_one_does_not():
    gaps = {"m": {"languages": {"en": _entry(10.0, [0.0, 20.0], 0.5), "es": _entry(10.0, None, None)}}}
    rows = gap_table(gaps)[2:4]
    assert "0.0 .. 20.0 (crosses 0)" in rows[0]
    assert "n/a .. n/a |" in rows[1] and "crosses" not in rows[1]


def test_a_language_with_one_gender_only_says_which_group_is_missing():
    """The real voices: Spanish is read by women only, so there is no E and no interval, and the row says why."""
    entry = {"metric": "wer", "groups": {"female": {"error_rate": 30.56}}, "missing_groups": ["male"]}
    rows = gap_table({"whisper-base": {"languages": {"es": entry, "fr": _entry(1.2, None, 0.68)}}})
    assert rows[2] == "| whisper-base | es | WER | 30.56 | n/a | n/a | n/a (no male voice) | n/a | n/a |"
    assert rows[3].startswith("| whisper-base | fr | WER | 6.70 | 2.90 |")


@pytest.mark.parametrize("entry", [{}, {"gap_estimate": "mean"}])
def test_an_unnamed_gap_estimate_is_an_error(entry):
    with pytest.raises(ValueError, match="gap_estimate"):
        gap_estimate_name(entry)


def test_average_test_length_is_speech_frames_with_stored_positions_beside_them():
    assert average_test_length({"mean_test_length": 13.333}) == "13.3 speech frames"
    assert average_test_length({"mean_test_length": 13.333, "stored_positions": 1500.0}) == "13.3 speech frames (1500.0 stored positions, padding included)"


def test_the_mdl_line_counts_the_uniform_blocks_and_says_what_compression_mixes():
    """The committed report's row: 4 blocks, blocks 1 and 2 after a one-gender prefix (science audit D3)."""
    row = {
        "codelength_online_bits": 35040.3,
        "codelength_uniform_bits": 22581.0,
        "compression": 0.6444,
        "mdl_blocks": 4,
        "mdl_uniform_blocks": [1, 2],
        "mdl_guard": "Bayesian mixture over the C grid",
    }
    text = " ".join(mdl_lines("encoder.final", row))
    assert "online codelength 35040.3 bits against 22581.0 uniform, compression 0.64" in text
    assert "(4 blocks cut at speaker boundaries, 3 of them coded uniformly, the first as always and 2 after speakers of one gender only;" in text
    assert "mixes prior shift with overconfidence" in text and "0.75" in text
    one = " ".join(mdl_lines("encoder.final", row | {"mdl_uniform_blocks": []}))
    assert "(4 blocks cut at speaker boundaries, 1 of them coded uniformly, the first as always; Bayesian" in one


def test_the_report_goes_to_the_work_folder_unless_asked(tmp_path):
    root = tmp_path / "work"
    assert report_folder(None, root) == root / "report"
    assert report_folder(tmp_path / "figures" / "demo", root) == tmp_path / "figures" / "demo"


def test_work_folder_is_versioned_with_the_corpus_and_the_work_format(monkeypatch, tmp_path):
    from experiments.demo.pipeline import WORK_VERSION
    from experiments.recipes.democorpus.build import CORPUS_VERSION

    monkeypatch.setenv("SPEECH_GENDER_CACHE", str(tmp_path))
    assert work_root(3, trim=False) == tmp_path / "demo" / f"v{CORPUS_VERSION}.{WORK_VERSION}-seed3"
    assert work_root(0, trim=True) == tmp_path / "demo-trim" / f"v{CORPUS_VERSION}.{WORK_VERSION}-seed0"


def test_threads_are_fixed_and_validated(capsys):
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(SystemExit) as exit_info:
        main(["--threads", "0"])
    assert exit_info.value.code == 2 and "--threads must be at least 1" in capsys.readouterr().err


def _skip_the_study(monkeypatch, pipeline, tmp_path, run_study=lambda work: None) -> None:
    """The demo with its corpus, study and report replaced (what the tests below check is the wrapper)."""
    from types import SimpleNamespace

    monkeypatch.setattr(pipeline, "stage_corpus", lambda seed, trim, root: SimpleNamespace(root=tmp_path))
    monkeypatch.setattr(pipeline, "build_real_voices", lambda work, trim, seed: None)
    monkeypatch.setattr(pipeline, "write_study", lambda work, positions, real: tmp_path / "demo.yaml")
    monkeypatch.setattr(pipeline, "run_study", run_study)
    monkeypatch.setattr(pipeline, "write_corpus_card", lambda work: False)


def test_a_failing_probe_run_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    import experiments.demo.pipeline as pipeline
    from probing.data import ProbeError

    def failing_study(work):
        raise ProbeError("positional probe on stores/whisper-base/demo-all, site encoder.final: no test speaker of one group")

    _skip_the_study(monkeypatch, pipeline, tmp_path, failing_study)
    before = torch.get_num_threads()
    try:
        assert main(["--work", str(tmp_path)]) == 2
    finally:
        torch.set_num_threads(before)
    assert capsys.readouterr().err.splitlines() == ["error: positional probe on stores/whisper-base/demo-all, site encoder.final: no test speaker of one group"]


def test_the_demo_study_runs_each_probe_once_and_mdl_only_at_the_last_site(tmp_path):
    """The demo's study file: every run it plans is distinct in collect's key (model, site, probe,
    control, language, apply_to), MDL runs once, and the per-language probes are at encoder.final."""
    from types import SimpleNamespace

    from experiments.demo.work import WHISPER_BASE_SITES, Work, demo_study, tiny_families, write_study
    from experiments.study.schema import load_study

    corpus = SimpleNamespace(root=tmp_path, manifest=tmp_path / "manifest.jsonl", mustshe_manifest=tmp_path / "mustshe.jsonl", mustshe_tsv=tmp_path / "m.tsv")
    for path in (corpus.manifest, corpus.mustshe_manifest, corpus.mustshe_tsv):
        path.write_text("")
    work = Work(tmp_path / "work", corpus, tmp_path / "report", "float32", 2)
    study = load_study(write_study(work, positions=250))
    assert [model.name for model in study.models] == ["whisper-base", "whisper-base-random", "whisper-tiny.en", *(f"tiny-random-{f}" for f in tiny_families())]
    assert [corpus.parts[0].name for corpus in study.corpora] == ["demo-all", "must_she-en-es"]
    runs = []
    for grid in study.probes:
        for model in (m for m in study.models if grid.probes_model(m.name)):
            sites = [site for site in model.sites if grid.sites is None or site in grid.sites]
            languages = [language for language in grid.languages if language is None or model.languages is None or language in model.languages]
            for site in sites:
                for probe in grid.probes:
                    for control in grid.controls:
                        for language in languages:
                            runs.append((model.name, site, probe, control, language, grid.apply_to, grid.options.get("mdl", False)))
    keys = [run[:6] for run in runs]
    assert len(keys) == len(set(keys))
    assert [run[:2] for run in runs if run[6]] == [("whisper-base", WHISPER_BASE_SITES[-1])]
    assert sorted((run[0], run[4]) for run in runs if run[4]) == [("whisper-base", "en"), ("whisper-base", "es"), ("whisper-tiny.en", "en")]
    assert demo_study(work, 250) == demo_study(work, 250)
    modified = work.study_file.stat().st_mtime_ns
    write_study(work, positions=250)
    assert work.study_file.stat().st_mtime_ns == modified  # unchanged: not rewritten, so a rerun only checks


def test_extra_stages_append_their_sections_to_the_report_once_each_in_order(monkeypatch, tmp_path):
    import experiments.demo.pipeline as pipeline

    report = tmp_path / "report.md"
    _skip_the_study(monkeypatch, pipeline, tmp_path)
    monkeypatch.setattr(pipeline, "write_report", lambda *args, **kwargs: report.write_text("# Demo report\n") and report)
    ran = []

    def fake_extra(name, work):
        ran.append(name)
        return [f"## {name}", "", f"work folder {work.root.name}"]

    monkeypatch.setattr(pipeline, "run_extra", fake_extra)
    before = torch.get_num_threads()
    try:
        assert main(["--work", str(tmp_path), "--extra", "grafn", "--extra", "winomt", "--extra", "grafn"]) == 0
    finally:
        torch.set_num_threads(before)
    assert ran == ["grafn", "winomt"]
    assert report.read_text() == f"# Demo report\n\n## grafn\n\nwork folder {tmp_path.name}\n\n## winomt\n\nwork folder {tmp_path.name}\n"
    ran.clear()
    try:
        assert main(["--work", str(tmp_path), "--extra", "all"]) == 0
    finally:
        torch.set_num_threads(before)
    assert ran == ["winomt", "grafn", "analyses", "interventions"]


def test_an_unknown_extra_stage_is_refused():
    from experiments.demo.extras import run_extra

    with pytest.raises(ValueError, match="unknown demo stage 'probes'; choose from winomt, grafn, analyses, interventions"):
        run_extra("probes", None)


def test_a_user_error_inside_an_extra_stage_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    import experiments.demo.pipeline as pipeline
    from experiments.scoring.grammatical_gender import AnalyserError

    _skip_the_study(monkeypatch, pipeline, tmp_path)
    monkeypatch.setattr(pipeline, "write_report", lambda *args, **kwargs: tmp_path / "report.md")

    def missing_pipeline(name, work):
        raise AnalyserError("spaCy pipeline 'fr_core_news_sm' is not installed")

    monkeypatch.setattr(pipeline, "run_extra", missing_pipeline)
    before = torch.get_num_threads()
    try:
        assert main(["--work", str(tmp_path), "--extra", "winomt"]) == 2
    finally:
        torch.set_num_threads(before)
    assert capsys.readouterr().err.splitlines() == ["error: spaCy pipeline 'fr_core_news_sm' is not installed"]


def test_without_debian_the_real_voices_are_skipped_in_one_line_and_the_report_says_so(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import experiments.recipes.realvoices.build as recipe
    from experiments.demo.report import real_voices_section
    from experiments.demo.work import Work, build_real_voices, demo_study, real_voices_skipped
    from experiments.recipes.realvoices.fetch import FetchError

    def unreachable(*args, **kwargs):
        raise FetchError("apt-get download asterisk-core-sounds-en failed (E: Unable to locate package): run `apt-get update` first (as root)")

    monkeypatch.setattr(recipe, "build_realvoices", unreachable)
    corpus = SimpleNamespace(root=tmp_path, manifest=tmp_path / "m.jsonl", mustshe_manifest=tmp_path / "s.jsonl", mustshe_tsv=tmp_path / "s.tsv")
    work = Work(tmp_path / "work", corpus, tmp_path / "report", "float32", 2)
    reason = build_real_voices(work, trim=True, seed=0)
    assert reason.startswith("apt-get download asterisk-core-sounds-en failed") and real_voices_skipped(work) == reason
    section = real_voices_section(work, None)
    assert "**Skipped**: the real-voice corpus could not be built (apt-get download asterisk-core-sounds-en failed" in section
    assert "`apt-get update` as root once" in section
    assert [c["name"] for c in demo_study(work, 250, real=False)["corpora"]] == ["demo", "must_she"]
    assert "baselines" not in demo_study(work, 250, real=False)


def test_the_report_names_no_machine_folder(monkeypatch, tmp_path):
    """Paths in the committed report: relative to the checkout, or under $SPEECH_GENDER_CACHE when
    that variable chose the cache; anything else as it is."""
    from experiments.demo.report import shown_path
    from extract.paths import source_checkout

    monkeypatch.setenv("SPEECH_GENDER_CACHE", str(tmp_path / "cache"))
    assert shown_path(tmp_path / "cache" / "demo" / "v2.4-seed0" / "demo.yaml") == "$SPEECH_GENDER_CACHE/demo/v2.4-seed0/demo.yaml"
    assert shown_path(source_checkout() / "figures" / "demo") == "figures/demo"
    assert shown_path(tmp_path / "elsewhere") == str((tmp_path / "elsewhere").resolve())


def test_per_voice_accuracy_comes_from_each_voices_own_clips_not_its_speakers_fold():
    """A speaker reading two languages is one fold but two voices (the audit's case: Allison Smith, 4 of
    6 English clips right and 6 of 6 Spanish, fold accuracy 83.3, per voice 66.7 and 100)."""
    from experiments.demo.report import voice_accuracy

    ids = [f"allison-en-{k}" for k in range(6)] + [f"allison-es-{k}" for k in range(6)] + ["carlo-it-0", "carlo-it-1"]
    correct = [1, 1, 0, 1, 0, 1] + [1] * 6 + [0.0, 1.0]
    voice_of = {i: ("carlo", "it") if i.startswith("carlo") else ("allison", i.split("-")[1]) for i in ids}
    accuracy = voice_accuracy(ids, correct, voice_of)
    assert accuracy == pytest.approx({("allison", "en"): 400 / 6, ("allison", "es"): 100.0, ("carlo", "it"): 50.0})
    with pytest.raises(KeyError):
        voice_accuracy(["unknown-0"], [1], voice_of)  # an utterance the manifest does not know is an error, not a silent drop
