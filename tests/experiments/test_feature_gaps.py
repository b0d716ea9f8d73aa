"""Group contrasts, the setup table for correlate and the error regression (issue 15), against scipy and statsmodels."""

import csv
import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats

from experiments import correlate as correlate_cli
from experiments import feature_gaps as feature_gaps_cli
from experiments.analysis.contrasts import (
    contrast,
    error_regression,
    feature_table,
    group_contrasts,
    poisson_fit,
    read_feature_rows,
    read_gap_setups,
    setup_table,
)
from extract.manifest import ManifestError, Utterance, read_manifest, write_manifest

FEMALE = [210.0, 190.0, 230.0, 205.0, 220.0, 199.0]
MALE = [120.0, 110.0, 135.0, 101.0, 125.0]


def test_contrast_against_scipy_and_by_hand():
    result = contrast(FEMALE, MALE)
    welch = stats.ttest_ind(FEMALE, MALE, equal_var=False)
    assert result["t"] == pytest.approx(welch.statistic) and result["p_t"] == pytest.approx(welch.pvalue) and result["df"] == pytest.approx(welch.df)
    student = contrast(FEMALE, MALE, equal_var=True)
    assert student["p_t"] == pytest.approx(stats.ttest_ind(FEMALE, MALE).pvalue) and student["df"] == 9
    u = stats.mannwhitneyu(FEMALE, MALE, alternative="two-sided")
    assert result["u"] == u.statistic == 30 and result["p_u"] == pytest.approx(u.pvalue)
    assert result["rank_biserial"] == pytest.approx(1.0)  # every female value above every male one: 2 * 30 / 30 - 1
    sd_f, sd_m = np.std(FEMALE, ddof=1), np.std(MALE, ddof=1)
    pooled = math.sqrt((5 * sd_f**2 + 4 * sd_m**2) / 9)
    assert result["cohens_d"] == pytest.approx((np.mean(FEMALE) - np.mean(MALE)) / pooled)
    assert result["difference"] == pytest.approx(np.mean(FEMALE) - np.mean(MALE))
    mixed = contrast([1.0, 2.0, 3.0], [2.0, 3.0, 4.0, 5.0])
    assert mixed["rank_biserial"] == pytest.approx(2 * stats.mannwhitneyu([1, 2, 3], [2, 3, 4, 5]).statistic / 12 - 1) and mixed["rank_biserial"] < 0


def test_contrast_that_cannot_be_tested():
    assert contrast([1.0], [2.0, 3.0])["p_t"] is None
    assert contrast([1.0, None, float("nan")], [2.0, 3.0])["note"] == "fewer than 2 values in a group"
    assert contrast([1.0, 1.0], [1.0, 1.0])["note"] == "no variation in either group"


def _table():
    rows = []
    rng = np.random.default_rng(0)
    for gender, values in (("female", FEMALE), ("male", MALE)):
        for i, f0 in enumerate(values):
            rows.append(
                {
                    "id": f"{gender}-{i}",
                    "dataset": "toy",
                    "language": "it",
                    "gender": gender,
                    "speaker": f"{gender}-{i % 2}",
                    "f0": f0,
                    "rate": float(rng.normal(4, 0.5)),
                    "density": float(rng.uniform(0.4, 0.6)),
                }
            )
    return rows


def test_group_contrasts_holm_over_the_features_of_a_language():
    from statsmodels.stats.multitest import multipletests

    rows = group_contrasts(_table(), ["f0", "rate", "density"])
    raw = [r["p_t"] for r in rows]
    assert [r["p_t_adjusted"] for r in rows] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    assert [r["p_u_adjusted"] for r in rows] == pytest.approx(list(multipletests([r["p_u"] for r in rows], method="holm")[1]))
    bh = group_contrasts(_table(), ["f0", "rate", "density"], correction="fdr_bh")
    assert [r["p_t_adjusted"] for r in bh] == pytest.approx(list(multipletests(raw, method="fdr_bh")[1]))
    assert [r["p_t_adjusted"] for r in group_contrasts(_table(), ["f0", "rate"], correction="none")] == pytest.approx(raw[:2])


def test_speaker_unit_tests_speaker_means():
    (row,) = group_contrasts(_table(), ["f0"], unit="speaker")
    female = [np.mean(FEMALE[0::2]), np.mean(FEMALE[1::2])]
    male = [np.mean(MALE[0::2]), np.mean(MALE[1::2])]
    assert row["n_a"] == 2 and row["p_t"] == pytest.approx(stats.ttest_ind(female, male, equal_var=False).pvalue)


def _write_gap(path, counts, gap_relative=12.5):
    report = {
        "settings": {"groups": ["female", "male"]},
        "languages": {"it": {"gap_relative": gap_relative, "gap_estimate": "full", "bootstrap": {"ci95": [1.0, 20.0]}}},
    }
    path.write_text(json.dumps(report))
    path.with_suffix(".counts.jsonl").write_text("".join(json.dumps(c) + "\n" for c in counts))
    return path


def _counts(table, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"id": r["id"], "language": "it", "gender": r["gender"], "speaker": r["speaker"], "errors": int(rng.integers(0, 6)), "length": int(rng.integers(8, 20))}
        for r in table
    ]


def test_setup_table_means_and_differences_by_hand(tmp_path):
    table = _table()
    counts = _counts(table)[:-1]  # the last male record was not scored: it must not count
    setups = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", counts))])
    (row,) = setup_table(setups, table, ["f0"])
    assert row["setup"] == "toy/it/whisper" and row["gap_relative"] == 12.5 and row["gap_ci95_low"] == 1.0
    assert row["female_f0"] == pytest.approx(np.mean(FEMALE)) and row["male_f0"] == pytest.approx(np.mean(MALE[:-1]))
    assert row["diff_f0"] == pytest.approx(np.mean(FEMALE) - np.mean(MALE[:-1]))


def test_regression_matches_statsmodels_directly(tmp_path):
    import statsmodels.api as sm

    table = _table()
    counts = _counts(table)
    (setup,) = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", counts))])
    result = error_regression(setup, table, ["rate", "density"])
    errors = np.array([c["errors"] for c in counts], dtype=float)
    lengths = np.array([c["length"] for c in counts], dtype=float)
    female = np.array([1.0 if r["gender"] == "female" else 0.0 for r in table])
    z = [(v - v.mean()) / v.std(ddof=1) for v in (np.array([r[f] for r in table]) for f in ("rate", "density"))]
    groups = np.unique([r["speaker"] for r in table], return_inverse=True)[1]
    fit = sm.GLM(errors, np.column_stack([np.ones(len(errors)), female, *z]), family=sm.families.Poisson(), offset=np.log(lengths)).fit(
        cov_type="cluster", cov_kwds={"groups": groups}
    )
    coefficients = result["with_features"]["coefficients"]
    assert [coefficients[name]["coef"] for name in ("intercept", "is_female", "z_rate", "z_density")] == pytest.approx(list(fit.params))
    assert [coefficients[name]["se"] for name in ("intercept", "is_female", "z_rate", "z_density")] == pytest.approx(list(fit.bse))
    assert coefficients["is_female"]["rate_ratio"] == pytest.approx(math.exp(fit.params[1]))
    assert result["records"] == 11 and result["speakers"] == 4 and result["dropped_null_feature"] == 0
    assert result["speakers_per_group"] == {"female": 2, "male": 2} and "fewer than 5 speakers" in result["reliability_note"]
    only = poisson_fit(errors, lengths, {"is_female": female}, [r["speaker"] for r in table])
    assert result["group_only"]["coefficients"]["is_female"]["coef"] == pytest.approx(only["coefficients"]["is_female"]["coef"])
    # the gender-only Poisson MLE is the log ratio of the groups' corpus error rates
    rate_f = errors[female == 1].sum() / lengths[female == 1].sum()
    rate_m = errors[female == 0].sum() / lengths[female == 0].sum()
    assert only["coefficients"]["is_female"]["coef"] == pytest.approx(math.log(rate_f / rate_m))


def test_regression_drops_null_features_and_leaves_out_constant_ones(tmp_path):
    table = _table()
    table[0]["rate"] = None
    for row in table:
        row["constant"] = 1.0
    (setup,) = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", _counts(table)))])
    result = error_regression(setup, table, ["rate", "constant"])
    assert result["dropped_null_feature"] == 1 and result["records"] == 10 and result["constant_features_left_out"] == ["constant"]
    assert "z_constant" not in result["with_features"]["coefficients"]


def _write_inputs(tmp_path, languages=("it", "es", "fr")):
    utterances, features, gaps = [], [], []
    rng = np.random.default_rng(1)
    for k, language in enumerate(languages):
        counts = []
        for gender, values in (("female", FEMALE), ("male", MALE)):
            for i, f0 in enumerate(values):
                record_id = f"{language}-{gender}-{i}"
                utterances.append(Utterance(record_id, "a.wav", language, "testo", gender, f"{language}-{gender}-{i % 2}", dataset="toy"))
                features.append(
                    {"id": record_id, "features": {"f0": f0 + 10 * k * (gender == "female"), "rate": float(rng.normal(4, 0.5))}, "null_reasons": {}}
                )
                counts.append({"id": record_id, "language": language, "gender": gender, "speaker": f"{language}-{gender}-{i % 2}", "errors": i, "length": 10})
        report = {"settings": {"groups": ["female", "male"]}, "languages": {language: {"gap_relative": 5.0 * k - 3.0}}}
        gap = tmp_path / f"gap-{language}.json"
        gap.write_text(json.dumps(report))
        gap.with_suffix(".counts.jsonl").write_text("".join(json.dumps(c) + "\n" for c in counts))
        gaps.append(gap)
    manifest = write_manifest(tmp_path / "m.jsonl", utterances)
    feature_file = tmp_path / "acoustic.jsonl"
    feature_file.write_text("".join(json.dumps(f) + "\n" for f in features))
    return manifest, feature_file, gaps


def test_cli_writes_the_table_that_correlate_reads(tmp_path, capsys):
    manifest, feature_file, gaps = _write_inputs(tmp_path)
    out = tmp_path / "fg.json"
    argv = ["--manifest", str(manifest), "--features", str(feature_file), "--out", str(out), "--regression-features", "f0,rate", "--bootstrap", "200"]
    assert feature_gaps_cli.main(argv + ["--gaps", *(f"whisper={g}" for g in gaps)]) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["t_test"] == "Welch" and len(result["contrasts"]) == 6 and len(result["setups"]) == 3
    assert len(result["regression"]["setups"]) == 3 and "with_features" in result["regression"]["setups"][0]
    assert result["schema"] == 1 and (result["subject"]["model"], result["subject"]["dataset"]) == ("whisper", "toy")
    assert [entry["path"] for entry in result["inputs"]] == [str(manifest), str(feature_file), *map(str, gaps)]  # each with its sha256
    with out.with_suffix(".setups.csv").open() as handle:
        setups = list(csv.DictReader(handle))
    assert [float(r["diff_f0"]) for r in setups] == pytest.approx([np.mean(FEMALE) - np.mean(MALE) + 10 * k for k in (0, 1, 2)])  # the order of --gaps
    over_all = next(c for c in result["correlations"] if c["dataset"] == "all" and c["feature"] == "diff_f0")
    assert over_all["pearson_r"] == pytest.approx(1.0) and over_all["setups"] == 3
    assert (
        correlate_cli.main(
            ["--table", str(out.with_suffix(".setups.csv")), "--x", "diff_f0", "--y", "gap_relative", "--label", "setup", "--out", str(tmp_path / "r.json")]
        )
        == 0
    )
    assert json.loads((tmp_path / "r.json").read_text())["pearson_r"] == pytest.approx(1.0)
    capsys.readouterr()


def test_cli_errors_are_one_line(tmp_path, capsys):
    manifest, feature_file, gaps = _write_inputs(tmp_path, languages=("it",))
    out = tmp_path / "fg.json"
    base = ["--manifest", str(manifest), "--features", str(feature_file), "--out", str(out)]
    assert feature_gaps_cli.main(base + ["--only", "pitch"]) == 2
    assert "no feature(s) pitch" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        feature_gaps_cli.main(base + ["--gaps", str(gaps[0])])  # no MODEL=
    assert exit_info.value.code == 2
    assert feature_gaps_cli.main(base + ["--gaps", f"whisper={tmp_path / 'missing.json'}"]) == 2
    assert "no such gap report" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "it-female-0", "features": {"f0": 1.0}}\n{"id": "it-female-1", "features": {"f0": "high"}}\n')
    assert feature_gaps_cli.main(["--manifest", str(manifest), "--features", str(bad), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{bad}:2" in error and len(error.strip().splitlines()) == 1
    with pytest.raises(ManifestError, match="given twice"):
        read_feature_rows([feature_file, feature_file])
    copy = tmp_path / "copy.jsonl"
    copy.write_text(feature_file.read_text())
    with pytest.raises(ManifestError, match="also in"):
        read_feature_rows([feature_file, copy])


def test_feature_table_keeps_manifest_metadata():
    utterances = [Utterance("a", "a.wav", "it", "x", "F", "s1", dataset="cv"), Utterance("b", "b.wav", "it", "x", "male", "s2", dataset="cv")]
    table = feature_table(utterances, {"a": {"f0": 200.0}}, ["f0", "rate"])
    assert table == [{"id": "a", "dataset": "cv", "language": "it", "gender": "female", "speaker": "s1", "f0": 200.0, "rate": None}]


def test_scored_records_without_features_are_counted_and_unknown_ids_refused(tmp_path):
    from experiments.analysis.contrasts import ContrastError

    table = _table()
    utterances = [Utterance(r["id"], "a.wav", "it", "x", r["gender"], r["speaker"], dataset="toy") for r in table]
    features = {r["id"]: {"f0": r["f0"]} for r in table[1:]}  # the first record has no feature row
    every = feature_table(utterances, features, ["f0"], every_record=True)
    (setup,) = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", _counts(table)))])
    (row,) = setup_table([setup], every, ["f0"])
    assert row["female_f0"] == pytest.approx(np.mean(FEMALE[1:]))
    assert error_regression(setup, every, ["f0"])["dropped_null_feature"] == 1
    with pytest.raises(ContrastError, match="not in the manifest"):
        setup_table([setup], every[1:], ["f0"])


def test_a_group_without_errors_is_not_fitted(tmp_path):
    table = _table()
    counts = [c | {"errors": 0} if c["gender"] == "female" else c | {"errors": 2} for c in _counts(table)]
    (setup,) = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", counts))])
    result = error_regression(setup, table, ["rate"])
    assert "female made no error" in result["note"] and "group_only" not in result


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_feature_values_are_refused_naming_the_line(tmp_path, capsys, value):
    """JSON has no NaN or Infinity; the package's feature writers say null with a reason. A
    non-finite value comes from another writer, and dropping it as if null would hide it (#104)."""
    manifest, feature_file, _ = _write_inputs(tmp_path, languages=("it",))
    lines = feature_file.read_text().splitlines()
    lines[2] = lines[2].replace('"rate": ', f'"rate": {value}, "was": ')
    feature_file.write_text("\n".join(lines) + "\n")
    assert feature_gaps_cli.main(["--manifest", str(manifest), "--features", str(feature_file), "--out", str(tmp_path / "fg.json")]) == 2
    assert capsys.readouterr().err == (
        f"error: {feature_file}:3: feature rate is {value}; write null (with its reason in null_reasons) for a value that is not defined\n"
    )
    assert not (tmp_path / "fg.json").exists()


def test_one_group_only_is_refused(tmp_path, capsys):
    """Female records only (#107): every contrast would be null, yet the run exited 0."""
    manifest, feature_file, _ = _write_inputs(tmp_path, languages=("it",))
    female = write_manifest(tmp_path / "female.jsonl", [u for u in read_manifest(manifest) if u.gender == "female"])
    assert feature_gaps_cli.main(["--manifest", str(female), "--features", str(feature_file), "--out", str(tmp_path / "fg.json")]) == 2
    assert capsys.readouterr().err == "error: toy/it: 6 female and 0 male records with features; comparing female with male needs at least 2 in each group\n"
    assert not (tmp_path / "fg.json").exists()


def test_one_speaker_per_group_is_refused_with_speaker_units(tmp_path, capsys):
    """One speaker per gender with --unit speaker (#108): one mean per group, nothing to test."""
    manifest, feature_file, _ = _write_inputs(tmp_path, languages=("it",))
    one = write_manifest(tmp_path / "one.jsonl", [dataclasses.replace(u, speaker=u.gender) for u in read_manifest(manifest)])
    base = ["--manifest", str(one), "--features", str(feature_file), "--out", str(tmp_path / "fg.json")]
    assert feature_gaps_cli.main([*base, "--unit", "speaker"]) == 2
    assert capsys.readouterr().err == (
        "error: toy/it: 1 female and 1 male speakers with features; comparing female with male per speaker (--unit speaker) "
        "needs at least 2 in each group (or use --unit record)\n"
    )
    assert feature_gaps_cli.main(base) == 0  # per record: 6 and 5


def test_feature_files_of_one_kind_for_different_records_merge(tmp_path):
    """One acoustic file per language (as a study writes them) read together; a feature of one record
    given by two files is still refused, naming the record and both files."""
    it, es = tmp_path / "acoustic-it.jsonl", tmp_path / "acoustic-es.jsonl"
    it.write_text('{"id": "it-0", "features": {"f0": 200.0}}\n')
    es.write_text('{"id": "es-0", "features": {"f0": 110.0, "rate": null}}\n')
    assert read_feature_rows([it, es]) == ({"it-0": {"f0": 200.0}, "es-0": {"f0": 110.0, "rate": None}}, ["f0", "rate"])
    es.write_text('{"id": "es-0", "features": {"rate": 4.0}}\n{"id": "it-0", "features": {"f0": 100.0}}\n')
    with pytest.raises(ManifestError, match=f"{es}:2: feature f0 of it-0 is also in {it}"):
        read_feature_rows([it, es])


def test_a_fit_that_statsmodels_cannot_make_is_a_note_not_a_traceback(tmp_path, monkeypatch):
    """A feature that duplicates the group indicator (as a tone corpus's F0 and token rate do) can make
    the clustered covariance singular: statsmodels raises LinAlgError, which the result turns into a
    note on that fit (the other fit is still made)."""
    from experiments.analysis import contrasts

    fit = contrasts.poisson_fit

    def singular_with_features(errors, lengths, columns, clusters):
        if len(columns) > 1:
            raise np.linalg.LinAlgError("Singular matrix")
        return fit(errors, lengths, columns, clusters)

    monkeypatch.setattr(contrasts, "poisson_fit", singular_with_features)
    table = _table()
    (setup,) = read_gap_setups([("whisper", _write_gap(tmp_path / "gap.json", _counts(table)))])
    result = error_regression(setup, table, ["f0"])
    assert "coefficients" in result["group_only"]
    assert result["with_features"] == {"note": "not fitted: Singular matrix (a column is a combination of others; see gender_feature_correlation)"}
