"""The papers' own published numbers fed through the package's own path: probe rows in the probe
results format (:class:`probing.run.ProbeConfig`, :func:`probing.results.save_result`), behaviour
results headed as the scorers head them (:func:`extract.provenance.identified`), then
``experiments.collect``, ``experiments.correlate`` and the study's correlation
(:func:`experiments.study.report.write_correlations`). Each must give back what the paper reports.

Fucci et al. 2025 (ACL), Figure 1: R² 0.99 (p < 0.01) between the probe's macro-F1 on the MuST-SHE
speakers (Table 1, "test-speaker", column "All" of en→es, en→fr, en→it) and gender accuracy
(Table 2, column "All Acc."), at each model's final site (Seamless and ZeroSwot post-ad, enc-dec):
9 points. On the tables' rounded values this is R² 0.977, p 5.3e-7; pooling the pre-adapter rows
too (15 points, each sharing its model's accuracy) gives R² 0.575, which is not the paper's figure.

Attanasio et al. 2024 (EMNLP) publish per-language numbers for one comparison only: Table 1 (§4.2),
E(r_O, r_M) of Whisper and SeamlessM4T on Common Voice ca, de, en, es, fr ("Positive values
indicate better performance on men"). Their per-language F1_S and E(r_F, r_M) are figures only
(Figures 2 and 4), so the n = 19 correlation of Figure 4 needs the corpora.

Boito et al. 2022 (Interspeech), Table 4: the WERs of male and female talks give the printed Δrel
through the gap report's own frame: exactly (to the print's rounding) for the hybrid systems (a);
within the WERs' rounding for the end-to-end ones (b), whose Δrel the paper computed before rounding.
"""

import hashlib
import json
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from experiments.collect import main as collect_main
from experiments.correlate import main as correlate_main
from experiments.results.collect import read_csv
from experiments.scoring.gaps import GAP_SCHEMA, gap_settings
from experiments.scoring.group_metrics import relative_gap
from experiments.scoring.mustshe import SCORES_SCHEMA
from experiments.study.report import _mustshe_section, write_correlations
from extract.provenance import identified
from probing.results import save_result
from probing.run import ROW_SCHEMA, ProbeConfig, ProbeResult

DIRECTIONS = ("es", "fr", "it")
# Fucci et al. 2025, Table 1, test-speaker, "All" (macro F1) for en→es, en→fr, en→it
FUCCI_TABLE_1 = {
    ("seamless-m4t-v2-large", "seamless", "post_adapter"): (51.72, 54.51, 55.63),
    ("seamless-m4t-v2-large", "seamless", "pre_adapter"): (67.32, 67.52, 70.58),
    ("zeroswot-large-mustc-en-to-8", "zeroswot", "post_adapter"): (61.80, 61.62, 60.65),
    ("zeroswot-large-mustc-en-to-8", "zeroswot", "pre_adapter"): (90.25, 90.02, 88.56),
    ("s2t-medium-mustc-multilingual-st", "s2t", "encoder.final"): (93.14, 94.59, 96.19),  # enc-dec
}
# Fucci et al. 2025, Table 2, "All" accuracy (the last column) for en→es, en→fr, en→it
FUCCI_TABLE_2 = {
    "seamless-m4t-v2-large": (53.62, 53.29, 53.15),
    "zeroswot-large-mustc-en-to-8": (64.46, 62.20, 61.75),
    "s2t-medium-mustc-multilingual-st": (86.45, 84.62, 85.65),
}
# Attanasio et al. 2024, Table 1 (§4.2): E(r_O, r_M) on Common Voice, p < 0.05
ATTANASIO_TABLE_1 = {
    "whisper-large-v3": {"ca": 4.68, "de": 37.20, "en": 28.50, "es": -2.00, "fr": 5.21},
    "seamless-m4t-v2-large": {"ca": 52.76, "de": 17.19, "en": 38.70, "es": 11.37, "fr": -0.50},
}


def _sha(text: str) -> str:
    """A manifest's sha256 stand-in, one per manifest name."""
    return hashlib.sha256(text.encode()).hexdigest()


def _probe_row(config: ProbeConfig, subject: dict, site_index: int, scores: dict, applied_subject: dict | None = None) -> dict:
    """A row as :func:`probing.run.run_probe` writes it (its splits and arrays aside)."""
    row = {
        "schema": ROW_SCHEMA,
        "run_id": config.run_id(),
        "store_identity": f"identity-of-{config.store}",
        "subject": subject,
        "site_index": site_index,
        "config": asdict(config),
        "seed": config.seed,
    }
    if applied_subject is not None:
        row["applied_to"] = {"store": config.apply_to, "subject": applied_subject}
    return row | scores


def _fucci_inputs(folder):
    probes = folder / "probes.jsonl"
    documents = []
    for (model, family, site), scores in FUCCI_TABLE_1.items():
        train = {"model": model, "family": family, "dataset": "must_c", "language": "en", "manifest_sha256": _sha("must_c-en-es")}
        for tgt, f1 in zip(DIRECTIONS, scores):
            config = ProbeConfig(f"stores/{model}/must_c-en-es", site, probe="attention", apply_to=f"stores/{model}/must_she-en-{tgt}")
            applied = {"model": model, "family": family, "dataset": "must_she", "language": "en", "manifest_sha256": _sha(f"must_she-en-{tgt}")}
            save_result(ProbeResult(_probe_row(config, train, 0 if site == "pre_adapter" else 1, {"applied_f1_macro": f1}, applied)), probes)
    for model, accuracies in FUCCI_TABLE_2.items():
        for tgt, accuracy in zip(DIRECTIONS, accuracies):
            subject = {"model": model, "tgt_lang": tgt, "manifest_sha256": _sha(f"must_she-en-{tgt}")}
            document = identified({"category_1": {"accuracy": accuracy}}, SCORES_SCHEMA, [], subject, kind="mustshe")
            path = folder / f"mustshe-{model}-{tgt}.json"
            path.write_text(json.dumps(document))
            documents.append(path)
    return probes, documents


def _correlation(path):
    return json.loads(path.read_text())


def test_fucci2025_figure_1_from_the_papers_tables_is_9_final_sites_r2_0977(tmp_path, capsys):
    probes, documents = _fucci_inputs(tmp_path)
    results = tmp_path / "results"
    assert collect_main(["--probes", str(probes), "--mustshe", *map(str, documents), "--out", str(results)]) == 0
    table = read_csv(results / "f1_vs_mustshe.csv")
    assert len(table) == 15
    assert {(row["model"], row["site"], row["site_role"]) for row in table if row["site_role"] == "final"} == {
        ("seamless-m4t-v2-large", "post_adapter", "final"),
        ("zeroswot-large-mustc-en-to-8", "post_adapter", "final"),
        ("s2t-medium-mustc-multilingual-st", "encoder.final", "final"),
    }
    for row in table:  # each pairing: Table 1's F1 of its site and direction with Table 2's accuracy of its model and direction
        family = {"seamless-m4t-v2-large": "seamless", "zeroswot-large-mustc-en-to-8": "zeroswot"}.get(row["model"], "s2t")
        index = DIRECTIONS.index(row["tgt_lang"])
        assert float(row["applied_f1_macro"]) == FUCCI_TABLE_1[(row["model"], family, row["site"])][index]
        assert float(row["category_1_accuracy"]) == FUCCI_TABLE_2[row["model"]][index]

    common = ["--table", str(results / "f1_vs_mustshe.csv"), "--x", "applied_f1_macro", "--y", "category_1_accuracy", "--label", "model,site,tgt_lang"]
    assert correlate_main([*common, "--where", "site_role=final", "--out", str(tmp_path / "final.json")]) == 0
    final = _correlation(tmp_path / "final.json")
    assert final["n"] == 9 and round(final["r2"], 3) == 0.977 and round(final["pearson_r"], 3) == 0.989
    assert final["p_value"] == pytest.approx(5.3e-7, rel=0.05)
    assert correlate_main([*common, "--out", str(tmp_path / "pooled.json")]) == 0
    pooled = _correlation(tmp_path / "pooled.json")  # what pooling every site gives: not the paper's figure
    assert pooled["n"] == 15 and round(pooled["r2"], 3) == 0.575

    layout = SimpleNamespace(results=results, figures=tmp_path / "figures")
    study = _correlation(write_correlations(layout, study=None))["f1_vs_mustshe"]
    assert study["where"] == {"site_role": "final"} and study["n"] == 9 and round(study["r2"], 3) == 0.977
    # the 9 points are 3 models: beside the paper's r, the study reports what 3 independent units allow
    assert study["cluster_by"] == "model" and study["n_clusters"] == 3
    assert study["p_permutation"] == pytest.approx(1 / 6) and study["p_permutation_floor"] == pytest.approx(1 / 6)
    assert round(study["r_between"], 3) == 0.993 and round(study["r_within"], 3) == -0.089
    assert "9 rows < 10" in study["ci95_note"] and "3 clusters < 10" in study["ci95_cluster_note"]
    section = "\n".join(_mustshe_section({"f1_vs_mustshe": results / "f1_vs_mustshe.csv"}, {"f1_vs_mustshe": study}))
    assert "Pearson r +0.989 (p 5.25e-07, 95 % CI not meaningful: 9 rows < 10), R² 0.977, n = 9" in section
    assert "permutation p 0.167, where the smallest p 3 clusters allow is 0.167 (no test over 3 clusters reaches p < 0.01)" in section
    assert "r of the 3 cluster means +0.993; r within clusters (each value minus its cluster's mean) -0.089" in section
    assert "Cluster-bootstrap intervals not meaningful: 3 clusters < 10." in section and "+0.96" not in section
    capsys.readouterr()


def test_attanasio2024_table_1_other_vs_male_gaps_pass_through_collect_unchanged(tmp_path, capsys):
    """Table 1's E(r_O, r_M), as gap reports of groups (other, male), joined to other-vs-male probes at
    Whisper's last layer: the tables carry the published values with the published sign."""
    probes, gaps = tmp_path / "probes.jsonl", []
    for model, values in ATTANASIO_TABLE_1.items():
        family, site = ("whisper", "encoder.final") if model.startswith("whisper") else ("seamless", "post_adapter")
        entries = {language: {"gap_relative": value, "gap_estimate": "resampled"} for language, value in values.items()}
        subject = {"model": model, "family": family, "dataset": "common_voice", "languages": sorted(values)}
        document = identified({"settings": gap_settings(("other", "male"), 1000, 0), "languages": entries}, GAP_SCHEMA, [], subject, kind="asr_gap")
        gaps.append(tmp_path / f"gap-{model}.json")
        gaps[-1].write_text(json.dumps(document))
        for language in values:
            config = ProbeConfig(f"stores/{model}/common_voice-{language}", site, task="other-male")
            subject = {"model": model, "family": family, "dataset": "common_voice", "language": language, "manifest_sha256": _sha(language)}
            save_result(ProbeResult(_probe_row(config, subject, 32, {"f1_s": 80.0})), probes)
    assert collect_main(["--probes", str(probes), "--gaps", *map(str, gaps), "--out", str(tmp_path / "results")]) == 0
    table = read_csv(tmp_path / "results" / "f1_vs_gap.csv")
    assert {(row["model"], row["language"]): float(row["gap_relative"]) for row in table} == {
        (model, language): value for model, values in ATTANASIO_TABLE_1.items() for language, value in values.items()
    }
    assert {row["task"] for row in table} == {"other-male"} and {row["site_role"] for row in table} == {"final"}
    long = read_csv(tmp_path / "results" / "long.csv")
    assert sorted(float(r["value"]) for r in long if r["kind"] == "asr_gap" and r["metric"] == "gap_relative") == sorted(
        value for values in ATTANASIO_TABLE_1.values() for value in values.values()
    )
    # the sign convention of Eq. 1 as the package computes it: more errors for "other" than for men is positive
    assert relative_gap(0.3, 0.2) == pytest.approx(50.0) and relative_gap(0.2, 0.3) < 0
    capsys.readouterr()


# Boito et al. 2022 (Interspeech), Table 4: WER on the mTEDx French test set, male and female talks,
# and the printed Δrel (Eq. 1: 100 (WER_F - WER_M) / (0.5 (WER_F + WER_M))), per pre-trained model
BOITO_TABLE_4A = {  # (a) hybrid ASR on SSL features: model -> (WER M, WER F, printed Δrel)
    "F-1K-Large": (25.7, 22.3, -14.2),
    "M-1K-Large": (25.4, 23.4, -8.2),
    "LB-1K-Large": (25.9, 22.9, -12.3),
    "LB-3K-Large": (22.1, 20.9, -5.6),
    "LB-7K-Large": (23.1, 21.3, -8.1),
}
BOITO_TABLE_4B = {  # (b) end-to-end ASR, the SSL model fine-tuned
    "F-1K-Large": (20.9, 17.7, -16.9),
    "M-1K-Large": (21.0, 18.5, -12.7),
    "LB-1K-Large": (15.3, 13.0, -16.6),
    "LB-3K-Large": (15.5, 13.5, -13.9),
    "LB-7K-Large": (15.9, 13.2, -19.0),
}
WER_ROUNDING = 0.05  # the tables print WER to one decimal


def _boito_delta_rel(wer_male: float, wer_female: float, words: int = 100_000) -> float:
    """Δrel through the package's gap path: per-utterance error counts (two talks per gender) whose
    corpus WER is the table's, the error-rate frame of experiments.asr_gap, its full-set gaps."""
    from experiments.scoring.gaps import error_rate_frame, full_set_gaps

    counts = []
    for gender, wer in (("male", wer_male), ("female", wer_female)):
        errors = round(wer / 100 * words)
        counts += [
            {"id": f"{gender}-1", "gender": gender, "speaker": f"{gender}-a", "errors": errors // 2, "length": words // 2},
            {"id": f"{gender}-2", "gender": gender, "speaker": f"{gender}-b", "errors": errors - errors // 2, "length": words - words // 2},
        ]
    return full_set_gaps(error_rate_frame(counts, ("female", "male")), "female", "male")["delta_rel"]


def test_boito_table_4a_delta_rel_is_reproduced_from_its_wers():
    """Table 4 (a): every printed Δrel is the package's Δrel of the printed WERs, to the print's rounding."""
    computed = {model: _boito_delta_rel(male, female) for model, (male, female, _) in BOITO_TABLE_4A.items()}
    assert computed["F-1K-Large"] == pytest.approx(-14.17, abs=0.005)  # 100 (22.3 - 25.7) / 24.0
    for model, (_, _, printed) in BOITO_TABLE_4A.items():
        assert abs(computed[model] - printed) <= 0.05, model


def test_boito_table_4b_delta_rel_was_computed_from_unrounded_wers():
    """Table 4 (b)'s printed Δrel differ from the Δrel of its rounded WERs by up to 0.44 (F-1K-Large:
    20.9 / 17.7 gives -16.58, printed -16.9; LB-7K-Large: -18.56, printed -19.0): the paper computed them from WERs before rounding. So
    the check is a bound, not equality: each printed Δrel lies within the range the WERs' rounding
    (±0.05 each) allows, widened by the Δrel's own rounding (±0.05). Δrel grows with WER_F and falls
    with WER_M, so the range's ends are two corners."""
    gaps = []
    for model, (male, female, printed) in BOITO_TABLE_4B.items():
        low = _boito_delta_rel(male + WER_ROUNDING, female - WER_ROUNDING)
        high = _boito_delta_rel(male - WER_ROUNDING, female + WER_ROUNDING)
        assert low - 0.05 <= printed <= high + 0.05, (model, low, printed, high)
        gaps.append(abs(_boito_delta_rel(male, female) - printed))
    assert _boito_delta_rel(20.9, 17.7) == pytest.approx(-16.58, abs=0.005)
    assert max(gaps) == pytest.approx(0.44, abs=0.01)  # LB-7K-Large: -18.56 from the rounded WERs, printed -19.0
