"""The typed result records (``extract.records``): round trips, files of today's format written by
hand (with and without ``schema``), a future version refused in one line, and the writers of each
format going through its record."""

import json

import pytest

from experiments.results.records import DOCUMENTS, GapReport, MustSheScores, StQualityScores, WinoMTResult
from extract.records import FORMATS, Document, ProbeRow, RecordError, read_document, read_version, write_document

PROVENANCE = {"package_version": "0.1.0", "git_commit": "ef243a0"}
SUBJECT = {
    "model": "whisper-base",
    "dataset": "fleurs",
    "languages": ["en"],
    "family": "whisper",
    "checkpoint": None,
    "revision": None,
    "manifest_sha256": None,
}
INPUTS = [{"path": "hyp/whisper-base.jsonl", "sha256": "ab" * 32}]

# a probe row as probing.run wrote it at ef243a0 (schema 1), keys in its order
ROW = {
    "schema": 1,
    "run_id": "5dbba6a0d85e1f91",
    "store_identity": "0123456789abcdef",
    "subject": {
        "model": "whisper-base",
        "family": "whisper",
        "checkpoint": "openai/whisper-base",
        "revision": None,
        "manifest_sha256": "cd" * 32,
        "dataset": "fleurs",
        "language": "en",
    },
    "site_index": 3,
    "config": {"store": "stores/wb", "site": "encoder.layer.3", "probe": "positional", "control": "none", "seed": 1, "task": "female-male"},
    "seed": 1,
    "splits": {"train": {"utterances": 40}, "test": {"utterances": 12}},
    "shared_speakers": {"dev": ["s1"]},
    "f1_macro": 81.25,
    "accuracy": 81.5,
    "recall": {"male": 80.0, "female": 83.0},
    "f1_s": 79.5,
    "positions_used": 10,
    **PROVENANCE,
}
# the same run as rows were written before ``schema``, ``store_identity`` and ``subject`` existed
OLD_ROW = {
    "run_id": "5dbba6a0d85e1f91",
    "site_index": 3,
    "config": ROW["config"],
    "seed": 1,
    "splits": ROW["splits"],
    "f1_macro": 81.25,
    "f1_s": 79.5,
    "package_version": "0.0.9",
}
GAP = {
    "schema": 1,
    "subject": SUBJECT,
    "inputs": INPUTS,
    "provenance": PROVENANCE,
    "kind": "asr_gap",
    "settings": {"groups": ["female", "male"], "iterations": 1000, "seed": 0},
    "languages": {"en": {"gap_relative": 12.5, "wer": {"female": 4.0, "male": 4.5}}},
}


def test_every_format_s_version_and_the_old_constants_read_from_the_registry():
    from experiments.analysis.contrasts import RESULT_SCHEMA as FEATURE_GAPS_SCHEMA
    from experiments.results.collect import COLLECT_SCHEMA
    from experiments.scoring.gaps import GAP_SCHEMA
    from experiments.scoring.mustshe import SCORES_SCHEMA as MUSTSHE_SCHEMA
    from experiments.scoring.translation_quality import SCORES_SCHEMA as ST_QUALITY_SCHEMA
    from experiments.scoring.winomt import RESULT_SCHEMA as WINOMT_SCHEMA
    from probing.run import ROW_SCHEMA

    assert {name: fmt.version for name, fmt in FORMATS.items()} == dict.fromkeys(
        ("probe_row", "asr_gap", "mustshe", "st_quality", "winomt", "feature_gaps", "collect", "study_tables"), 1
    ) | {"patch_summary": 2}  # 2: the graded metric, per-match differences and the two-way interval (issue 43)
    assert (ROW_SCHEMA, GAP_SCHEMA, MUSTSHE_SCHEMA, ST_QUALITY_SCHEMA, WINOMT_SCHEMA, FEATURE_GAPS_SCHEMA, COLLECT_SCHEMA) == (1,) * 7
    assert set(DOCUMENTS) == {"asr_gap", "mustshe", "st_quality", "winomt", "feature_gaps", "patch_summary"}


def test_a_probe_row_round_trips_in_its_key_order():
    record = ProbeRow.from_dict(ROW)
    assert (record.run_id, record.schema, record.site_index, record.probe) == ("5dbba6a0d85e1f91", 1, 3, "positional")
    assert list(record.scores) == ["shared_speakers", "f1_macro", "accuracy", "recall", "f1_s", "positions_used", "package_version", "git_commit"]
    assert record.to_dict() == ROW and list(record.to_dict()) == list(ROW)
    assert json.loads(json.dumps(record.to_dict())) == ROW


def test_a_row_without_schema_reads_as_version_1_keeping_every_key_it_has():
    record = ProbeRow.from_dict(OLD_ROW)
    assert record.schema == 1 and record.subject is None and record.store_identity is None
    assert record.to_dict() == {"schema": 1, **OLD_ROW}  # what it lacks stays absent


@pytest.mark.parametrize(
    "schema, message",
    [
        (2, r"rows\.jsonl:7: a probe row of schema 2, newer than this code reads \(1\); update the package"),
        ("1", r"rows\.jsonl:7: a probe row whose schema is '1', not a version number"),
        (0, r"rows\.jsonl:7: a probe row whose schema is 0, not a version number"),
        (True, r"rows\.jsonl:7: a probe row whose schema is True, not a version number"),
    ],
)
def test_a_row_of_a_future_or_malformed_version_is_refused_in_one_line(schema, message):
    with pytest.raises(RecordError, match=message) as error:
        ProbeRow.from_dict(ROW | {"schema": schema}, "rows.jsonl:7")
    assert "\n" not in str(error.value)


def test_a_row_without_run_id_is_not_a_probe_row():
    with pytest.raises(RecordError, match=r"^x:1: not a probe row \(no 'run_id'\)$"):
        ProbeRow.from_dict({"config": {}}, "x:1")


def test_a_gap_report_round_trips_and_reads_its_languages(tmp_path):
    record = GapReport.from_dict(GAP)
    assert record.to_dict() == GAP and list(record.to_dict()) == list(GAP)
    assert record.languages["en"]["gap_relative"] == 12.5 and record.subject["model"] == "whisper-base"
    path = write_document(record, tmp_path / "gap.json")
    assert json.loads(path.read_text()) == GAP
    assert read_document(path, GapReport) == record


def test_a_document_written_before_schema_and_kind_reads_as_version_1(tmp_path):
    old = {"subject": SUBJECT, "category_1": {"accuracy": 61.5}, "overall": {"accuracy": 70.0}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    record = read_document(tmp_path / "old.json", MustSheScores)
    assert (record.schema, record.kind, record.inputs, record.provenance) == (1, None, None, None)
    assert record.category_1 == {"accuracy": 61.5} and record.to_dict() == {"schema": 1, **old}


@pytest.mark.parametrize("record", [GapReport, MustSheScores, StQualityScores, WinoMTResult])
def test_a_document_of_a_future_version_is_refused_naming_the_file(record, tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"schema": 3, "subject": SUBJECT, "kind": record.FORMAT}))
    with pytest.raises(RecordError, match=rf"^{path}: a .* of schema 3, newer than this code reads \(1\); update the package$"):
        read_document(path, record)


def test_a_document_of_another_kind_or_not_json_is_refused_naming_the_file(tmp_path):
    (tmp_path / "gap.json").write_text(json.dumps(GAP))
    with pytest.raises(RecordError, match=r"gap\.json: a asr_gap result, not a MuST-SHE result"):
        read_document(tmp_path / "gap.json", MustSheScores)
    (tmp_path / "cut.json").write_text('{"schema": 1, "subj')
    with pytest.raises(RecordError, match=r"cut\.json: not a readable gap report \(JSONDecodeError"):
        read_document(tmp_path / "cut.json", GapReport)
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match=r"list\.json: not a gap report \(a JSON list, not an object\)"):
        read_document(tmp_path / "list.json", GapReport)


def test_identified_writes_the_record_of_its_kind(tmp_path, monkeypatch):
    """The header every behaviour document carries is its record's: same keys, same order as before."""
    from extract import provenance

    monkeypatch.setattr(provenance, "provenance", lambda: PROVENANCE)
    hypotheses = tmp_path / "hyp.jsonl"
    hypotheses.write_text("{}\n")
    document = provenance.identified({"settings": GAP["settings"], "languages": GAP["languages"]}, 1, [hypotheses], SUBJECT, kind="asr_gap")
    assert list(document) == ["schema", "subject", "inputs", "provenance", "kind", "settings", "languages"]
    assert document["inputs"] == [provenance.file_identity(hypotheses)] and GapReport.from_dict(document).to_dict() == document
    other = provenance.identified({"score": 1}, 3, [], SUBJECT, kind="a_users_stage")  # a kind without a record: headed alike
    assert other == {"schema": 3, "subject": SUBJECT, "inputs": [], "provenance": PROVENANCE, "kind": "a_users_stage", "score": 1}


def test_read_version_names_the_format():
    assert read_version({}, "collect", "c.json") == 1
    with pytest.raises(RecordError, match=r"c\.json: a collect summary of schema 9"):
        read_version({"schema": 9}, "collect", "c.json")


def test_a_document_record_is_plain_data():
    """A record compares by value and ``new`` heads it as this code writes it."""
    record = WinoMTResult.new({"by_stereotype": {"pro": 1}}, SUBJECT, INPUTS, PROVENANCE)
    assert record == WinoMTResult.from_dict(record.to_dict()) and record.kind == "winomt" and record.schema == 1
    assert isinstance(record, Document) and record.by_stereotype == {"pro": 1}


def test_a_results_file_of_old_and_current_rows_reads_as_written_and_a_future_row_names_its_line(tmp_path):
    from probing.results import ResultsError, load_numbered_rows, load_records, load_rows

    path = tmp_path / "probes.jsonl"
    path.write_text(json.dumps(OLD_ROW | {"run_id": "old"}) + "\n" + json.dumps(ROW) + "\n")
    assert load_rows(path) == {"old": OLD_ROW | {"run_id": "old"}, ROW["run_id"]: ROW}  # the dicts as the file holds them
    assert {run_id: record.schema for run_id, record in load_records(path).items()} == {"old": 1, ROW["run_id"]: 1}
    with path.open("a") as handle:
        handle.write(json.dumps(ROW | {"run_id": "new", "schema": 2}) + "\n")
    with pytest.raises(ResultsError, match=r"probes\.jsonl:3: a probe row of schema 2, newer than this code reads \(1\); update the package"):
        load_numbered_rows(path)


def test_collect_refuses_a_gap_report_of_a_future_version_in_one_line(tmp_path, capsys):
    from experiments.collect import main

    probes = tmp_path / "probes.jsonl"
    probes.write_text(json.dumps(ROW) + "\n")
    gap = tmp_path / "gap.json"
    gap.write_text(json.dumps(GAP | {"schema": 2}))
    assert main(["--probes", str(probes), "--gaps", str(gap), "--out", str(tmp_path / "results")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {gap}: a gap report of schema 2, newer than this code reads (1); update the package"]


def test_the_table_records_are_the_columns_collect_writes():
    from dataclasses import fields

    from experiments.results.collect import F1_VS_GAP, F1_VS_MUSTSHE, LONG
    from experiments.results.records import F1VsGapRow, F1VsMustSheRow, LongRow

    assert [f.name for f in fields(F1VsGapRow)] == list(F1_VS_GAP)
    assert [f.name for f in fields(F1VsMustSheRow)] == list(F1_VS_MUSTSHE)
    assert [f.name for f in fields(LongRow)] == list(LONG)
    for header in (F1_VS_GAP, F1_VS_MUSTSHE, LONG):
        assert len(set(header)) == len(header), f"a column named twice in {header}"


def test_a_table_row_round_trips_through_the_csv_collect_writes(tmp_path):
    from experiments.results.collect import F1_VS_GAP, LONG, write_csv
    from experiments.results.records import F1VsGapRow, LongRow, read_table

    gap = F1VsGapRow(
        "whisper-base",
        "fleurs",
        "en",
        "encoder.final",
        6,
        "final",
        "female-male",
        "fixed",
        81.25,
        "0 1",
        12.5,
        "resampled",
        -3.0,
        28.75,
        "relative_gap",
        "a b",
        "gap.json",
    )
    long = LongRow(
        "probe",
        "whisper-base",
        "fleurs",
        "en",
        None,
        "encoder.final",
        "positional",
        "none",
        0,
        "female-male",
        "fixed",
        None,
        "f1_s",
        6,
        None,
        79.5,
        "p.jsonl:1",
    )
    assert read_table(write_csv([gap.to_dict()], F1_VS_GAP, tmp_path / "f1_vs_gap.csv"), F1VsGapRow) == [gap]
    assert read_table(write_csv([long.to_dict()], LONG, tmp_path / "long.csv"), LongRow) == [long]
    assert (
        (tmp_path / "f1_vs_gap.csv")
        .read_text()
        .splitlines()[0]
        .endswith(
            ",task,split,f1_s,seeds,gap_relative,gap_estimate,ci95_low,ci95_high,ci95_of,probe_runs,gap_source,"
            "f1_control_shuffled,selectivity_shuffled,f1_control_speaker,selectivity_speaker"
        )
    )
    assert (tmp_path / "long.csv").read_text().splitlines()[0].endswith(",value,source,q_value")


def test_a_table_written_before_a_column_was_added_reads_it_as_empty(tmp_path):
    """The control columns of f1_vs_mustshe.csv and long.csv's q_value came after version 1: an older table still reads."""
    from experiments.results.records import CONTROL_COLUMNS, CONTROLLED, F1VsMustSheRow, read_table
    from probing.controls import CONTROLS

    assert CONTROLLED == tuple(control for control in CONTROLS if control != "none")
    assert CONTROL_COLUMNS == ("f1_control_shuffled", "selectivity_shuffled", "f1_control_speaker", "selectivity_speaker")
    path = tmp_path / "f1_vs_mustshe.csv"
    path.write_text("model,site,site_index,site_role,split,tgt_lang,applied_f1_macro,seeds,category_1_accuracy,probe_runs,mustshe_source\n")
    path.write_text(path.read_text() + "m,s,1,final,fixed,it,80.5,0,61,r,x.json\n")
    (row,) = read_table(path, F1VsMustSheRow)
    assert row.applied_f1_macro == 80.5 and row.selectivity_shuffled is None and row.f1_control_speaker is None


def test_a_table_row_of_a_malformed_cell_or_without_a_column_names_its_line(tmp_path):
    from experiments.results.records import F1VsMustSheRow, read_table

    path = tmp_path / "f1_vs_mustshe.csv"
    header = "model,site,site_index,site_role,split,tgt_lang,applied_f1_macro,seeds,category_1_accuracy,probe_runs,mustshe_source"
    path.write_text(header + "\nm,s,1,final,fixed,it,80.5,0,61,r,x.json\nm,s,1,final,fixed,it,high,0,61,r,x.json\n")
    with pytest.raises(RecordError, match=r"f1_vs_mustshe\.csv:3: applied_f1_macro is 'high', not a number"):
        read_table(path, F1VsMustSheRow)
    path.write_text("model,site\nm,s\n")
    with pytest.raises(RecordError, match=r"f1_vs_mustshe\.csv:2: no site_index, site_role, split"):
        read_table(path, F1VsMustSheRow)


def test_the_scoring_writers_write_through_the_records(tmp_path):
    """save_gap_report, mustshe.save_scores and winomt.save_result write their document's record:
    the dict they were given (undefined numbers of a gap report as null), UTF-8, one final newline."""
    from experiments.scoring import gaps, mustshe, winomt

    report = GAP | {"subject": SUBJECT | {"dataset": "fleurs-é"}, "languages": {"en": {"gap_relative": float("nan")}}}
    gaps.save_gap_report(report, [], tmp_path / "gap.json")
    text = (tmp_path / "gap.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and '"fleurs-é"' in text and '"gap_relative": null' in text
    assert read_document(tmp_path / "gap.json", GapReport).to_dict() == report | {"languages": {"en": {"gap_relative": None}}}
    scores = {"schema": 1, "subject": SUBJECT, "inputs": [], "provenance": PROVENANCE, "kind": "mustshe", "category_1": {"accuracy": 61.5}}
    mustshe.save_scores(scores, [], tmp_path / "mustshe.json")
    assert read_document(tmp_path / "mustshe.json", MustSheScores).to_dict() == scores
    with pytest.raises(RecordError, match=r"winomt\.json: a mustshe result, not a WinoMT result"):
        winomt.save_result(scores, [], tmp_path / "winomt.json")


def test_a_summary_without_a_record_is_read_with_its_version_checked(tmp_path):
    from extract.records import read_versioned

    path = tmp_path / "collect.json"
    path.write_text(json.dumps({"inputs": [], "tables": {}}))  # written before collect.json recorded its schema
    assert read_versioned(path, "collect") == {"inputs": [], "tables": {}}
    path.write_text(json.dumps({"schema": 2, "inputs": []}))
    with pytest.raises(RecordError, match=r"collect\.json: a collect summary of schema 2, newer than this code reads \(1\); update the package"):
        read_versioned(path, "collect")
    path.write_text("[]")
    with pytest.raises(RecordError, match=r"collect\.json: not a collect summary \(a JSON list, not an object\)"):
        read_versioned(path, "collect")


def test_the_st_quality_and_feature_gaps_writers_write_through_their_records(tmp_path):
    """st_quality's and feature_gaps' documents go through their records (UTF-8, one final newline);
    a file st_quality wrote before (indented, ASCII-escaped, no final newline, no schema) reads as version 1."""
    from experiments.results.records import FeatureGapsResult
    from experiments.scoring.translation_quality import save_quality_report

    scores = {"schema": 1, "subject": SUBJECT, "inputs": INPUTS, "provenance": PROVENANCE, "kind": "st_quality", "groups": {"all": {"bleu": 31.5}}}
    save_quality_report(scores | {"target_language": "é"}, tmp_path / "st" / "quality.json")
    text = (tmp_path / "st" / "quality.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and '"é"' in text
    assert read_document(tmp_path / "st" / "quality.json", StQualityScores).groups == {"all": {"bleu": 31.5}}
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"groups": {"all": {"bleu": 20.0}}, "target_language": "es", "comet_model": None}, indent=2))
    record = read_document(old, StQualityScores)
    assert record.schema == 1 and record.groups == {"all": {"bleu": 20.0}} and record.to_dict()["comet_model"] is None
    with pytest.raises(RecordError, match=r"quality\.json: a st_quality result, not a feature-gaps result"):
        read_document(tmp_path / "st" / "quality.json", FeatureGapsResult)


def test_side_rows_round_trip_and_a_bad_line_names_the_file_and_line(tmp_path):
    from extract.records import read_side_rows, write_side_rows

    rows = [{"id": "a", "translation_gender": "female", "text": "niña"}, {"id": "b", "translation_gender": "male"}]
    path = write_side_rows(rows, tmp_path / "mustshe.sentences.jsonl")
    assert read_side_rows(path, MustSheScores) == rows and "niña" in path.read_text(encoding="utf-8")
    path.write_text('{"id": "a"}\n\n[1, 2]\n')
    with pytest.raises(
        RecordError, match=r"sentences\.jsonl:3: not a row of a MuST-SHE result \(a JSON list, not an object\); rerun python -m experiments\.mustshe"
    ):
        read_side_rows(path, MustSheScores)
    path.write_text('{"id": "a"}\n{"id": \n')
    with pytest.raises(RecordError, match=r"sentences\.jsonl:2: not a row of a MuST-SHE result"):
        read_side_rows(path, MustSheScores)
