"""GRAFN (experiments.normalisation, experiments.grafn): the transform, the calibration, the filters
file, the label-free modes and the command line."""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
from scipy.signal import lfilter

from experiments import grafn as cli
from experiments.normalisation.calibration import fit_filters, group_spectra, spectrum_distance, utterance_gain
from experiments.normalisation.corpus import apply_to_manifest, choose_filter, output_name, predicted_gender
from experiments.normalisation.filters import GrafnFilters, load_filters
from experiments.normalisation.transform import GrafnError, GrafnParameters, gain_toward, grafn, local_normalise, rebalance
from extract.audio import load_audio
from extract.manifest import Utterance, read_manifest, write_manifest

RATE = 16_000


def voice(f0: float, tilt: float, seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    """A synthetic voice: a jittered pulse train at ``f0`` through a one-pole low-pass (``tilt`` near 1:
    a steep spectral tilt), in 4 Hz syllables, with a little noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    pulses = np.zeros(n)
    position = 0.0
    while position < n:
        pulses[int(position)] = 1.0
        position += RATE / (f0 * (1 + 0.02 * rng.standard_normal()))
    shaped = lfilter([1.0], [1.0, -tilt], pulses)
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * np.arange(n) / RATE)
    signal = shaped * envelope + 0.01 * rng.standard_normal(n)
    return (0.3 * signal / np.max(np.abs(signal))).astype(np.float32)


FEMALE, MALE = {"f0": 220.0, "tilt": 0.5}, {"f0": 110.0, "tilt": 0.95}


def corpus(per_group: int = 6) -> list[tuple[str, str, np.ndarray]]:
    """(gender, speaker, samples): three speakers per group with slightly different voices."""
    items = []
    for index in range(per_group):
        speaker = index % 3
        items.append(("female", f"f{speaker}", voice(FEMALE["f0"] * (1 + 0.05 * speaker), FEMALE["tilt"], seed=index)))
        items.append(("male", f"m{speaker}", voice(MALE["f0"] * (1 + 0.05 * speaker), MALE["tilt"], seed=100 + index)))
    return items


@pytest.fixture(scope="module")
def fitted() -> GrafnFilters:
    return fit_filters(corpus(), GrafnParameters())


# --- step 1: local statistical alignment ---------------------------------------------------------


def test_local_normalisation_matches_a_hand_computed_fixture():
    params = GrafnParameters(window_seconds=2 / RATE, floor_ratio=0.0)  # W = 3 samples, centred; 2 at the edges
    assert params.window_samples == 3
    expected = [-1.0, (2 - 7 / 3) / np.sqrt(7 - 49 / 9), (4 - 14 / 3) / np.sqrt(28 - 196 / 9), 1.0]
    np.testing.assert_allclose(local_normalise(np.array([1.0, 2.0, 4.0, 8.0]), params), expected, rtol=1e-12)


def test_the_floor_keeps_a_silent_stretch_finite_and_quiet():
    samples = np.concatenate([voice(200, 0.6, 0.5), np.zeros(4000, dtype=np.float32), voice(200, 0.6, 0.5, seed=1)])
    out = local_normalise(samples, GrafnParameters())
    assert np.all(np.isfinite(out)) and np.all(out[8200:11800] == 0)
    assert np.std(out[:8000]) == pytest.approx(1.0, abs=0.25)  # speech: about unit local variance


def test_a_constant_signal_without_a_floor_is_refused():
    with pytest.raises(GrafnError, match="nothing to divide by"):
        local_normalise(np.ones(100), GrafnParameters(floor_ratio=0.0))
    with pytest.raises(GrafnError, match="non-finite"):
        local_normalise(np.array([0.0, np.nan, 1.0]), GrafnParameters())


# --- steps 2 and 3: spectral rebalancing and reconstruction --------------------------------------


@pytest.mark.parametrize("length", [2, 255, 512, 1001, 16_000, 16_001])
def test_a_unit_gain_returns_the_locally_normalised_signal_with_the_input_length(length):
    params = GrafnParameters(output_rms=1.0)
    samples = np.random.default_rng(length).standard_normal(length)
    normalised = local_normalise(samples, params)
    out = grafn(samples, np.zeros(len(params.frequencies)), params)
    assert out.shape == (length,) and out.dtype == np.float32
    np.testing.assert_allclose(out, normalised.astype(np.float32), atol=1e-5)
    np.testing.assert_allclose(rebalance(normalised, np.zeros(len(params.frequencies)), params), normalised, atol=1e-12)


def test_output_rms_is_a_constant_scale():
    samples = voice(150, 0.8)
    one, tenth = grafn(samples, None, GrafnParameters(output_rms=1.0)), grafn(samples, None, GrafnParameters(output_rms=0.1))
    np.testing.assert_allclose(tenth, 0.1 * one, rtol=1e-5, atol=1e-7)


def test_a_gain_of_the_wrong_size_is_refused():
    with pytest.raises(GrafnError, match="257"):
        grafn(voice(150, 0.8), np.zeros(100), GrafnParameters())


def test_gains_are_smoothed_and_clipped():
    params = GrafnParameters(max_gain_db=6.0, smoothing_hz=300.0)
    spectrum = np.zeros(len(params.frequencies))
    spectrum[100] = -200.0  # one deep bin: its gain is spread over ~300 Hz (11 bins, 18 dB each) and clipped at 6 dB
    gain = gain_toward(np.zeros_like(spectrum), spectrum, params)
    assert gain.max() == 6.0 and gain.min() >= -6.0
    assert np.count_nonzero(gain) == 2 * int(round(300 / (RATE / 512) / 2)) + 1


@pytest.mark.parametrize(
    "options, message",
    [
        ({"window_seconds": 0}, "window_seconds"),
        ({"hop": 400}, "hop"),
        ({"target": "neutral"}, "target"),
        ({"max_gain_db": -1}, "max_gain_db"),
        ({"window": "no-such-window"}, "window"),
        ({"sample_rate": 8000}, "16000"),
    ],
)
def test_bad_parameters_are_refused(options, message):
    with pytest.raises(GrafnError, match=message):
        GrafnParameters(**options)


# --- calibration ---------------------------------------------------------------------------------


def test_fitted_filters_bring_the_group_spectra_closer(fitted):
    items = corpus()
    params = fitted.params
    before = group_spectra(items, params, local=False)
    after_items = [(g, s, grafn(x, fitted.gain(g), params)) for g, s, x in items]
    after = group_spectra(after_items, params, local=False)
    distance = {name: spectrum_distance(spectra.db("female"), spectra.db("male"), params) for name, spectra in (("before", before), ("after", after))}
    assert distance["after"]["shape_rms_db"] < 0.25 * distance["before"]["shape_rms_db"]
    assert distance["after"]["rms_db"] < distance["before"]["rms_db"]


def test_the_geometric_target_moves_each_group_half_way(fitted):
    # with a geometric target and no clipping, H_female H_male = 1 (gains opposite in dB)
    params = GrafnParameters(max_gain_db=100.0)
    filters = fit_filters(corpus(), params)
    np.testing.assert_allclose(filters.gain("female"), -filters.gain("male"), atol=1e-9)
    assert filters.groups["female"]["utterances"] == 6 and filters.groups["female"]["speakers"] == 3


def test_a_one_sided_target_maps_the_other_group_onto_it():
    filters = fit_filters(corpus(), GrafnParameters(target="female", max_gain_db=100.0))
    assert np.all(filters.gain("female") == 0.0) and np.ptp(filters.gain("male")) > 10


def test_calibration_needs_both_groups_and_counts_other_labels():
    items = [(g, s, x) for g, s, x in corpus(3) if g == "female"] + [("other", "o1", voice(160, 0.7))]
    with pytest.raises(GrafnError, match="no male utterance"):
        fit_filters(items, GrafnParameters())
    filters = fit_filters(corpus(3) + [("other", "o1", voice(160, 0.7))], GrafnParameters())
    assert filters.calibration["passed_over"] == {"other": 1}


def test_the_pitch_rule_threshold_lies_between_the_groups(fitted):
    low, high = fitted.groups["male"]["median_f0_hz"], fitted.groups["female"]["median_f0_hz"]
    assert 100 < low < fitted.pitch_threshold_hz < high < 260
    assert predicted_gender(voice(240, 0.5), fitted)[0] == "female"
    assert predicted_gender(voice(100, 0.95), fitted)[0] == "male"


def test_the_per_utterance_gain_moves_an_utterance_toward_the_target(fitted):
    params = fitted.params
    male = voice(115, 0.95, seed=7)
    before = group_spectra([("male", "x", male)], params).db("male")
    after = group_spectra([("male", "x", grafn(male, utterance_gain(male, fitted), params) / params.output_rms)], params, local=False).db("male")
    band = (params.frequencies > 100) & (params.frequencies < 7000)
    assert np.abs(after - fitted.target_db)[band].mean() < np.abs(before - fitted.target_db)[band].mean()


def test_choices_per_mode(fitted):
    sample = voice(230, 0.5)
    assert choose_filter(fitted, "gender", "female", sample).filter == "female"
    passed = choose_filter(fitted, "gender", "unknown", sample)
    assert passed.gain_db is None and "not binary" in passed.reason
    predicted = choose_filter(fitted, "predicted", "male", sample)  # the label is not read
    assert predicted.filter == "female" and predicted.f0_hz > fitted.pitch_threshold_hz
    assert choose_filter(fitted, "utterance", "unknown", sample).filter == "utterance"


# --- the filters file ----------------------------------------------------------------------------


def test_filters_round_trip_through_their_file(fitted, tmp_path):
    path = fitted.save(tmp_path / "filters.json")
    loaded = load_filters(path)
    assert loaded.params == fitted.params and loaded.pitch_threshold_hz == fitted.pitch_threshold_hz
    np.testing.assert_array_equal(loaded.target_db, fitted.target_db)
    for group in ("female", "male"):
        np.testing.assert_array_equal(loaded.gain(group), fitted.gain(group))
        assert loaded.groups[group]["speakers"] == fitted.groups[group]["speakers"]
    record = json.loads(path.read_text())
    assert record["parameters"]["n_fft"] == 512 and len(record["frequencies_hz"]) == 257  # every parameter, readable


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.update(format="something"), "not a GRAFN filters file"),
        (lambda r: r.update(version=99), "version 99"),
        (lambda r: r["groups"]["male"].update(gain_db=[0.0] * 10), "groups.male.gain_db must be a list of 257"),
        (lambda r: r["groups"]["female"].update(gain_db=[50.0] * 257), "exceeds max_gain_db"),
        (lambda r: r["parameters"].update(colour="blue"), "unknown GRAFN parameter"),
        (lambda r: r.pop("target_db"), "missing key"),
        (lambda r: r.update(pitch_threshold_hz=-3), "pitch_threshold_hz"),
        (lambda r: r["parameters"].update(n_fft="512"), "parameter n_fft must be an integer, got '512'"),
        (lambda r: r["parameters"].update(hop=True), "parameter hop must be an integer, got True"),
        (lambda r: r["parameters"].update(active_db="40"), "parameter active_db must be a number or null"),
        (lambda r: r["parameters"].update(output_rms=1e39), "output_rms 1e\\+39 with max_gain_db 12 can take the output to 1e44, beyond the float32"),
    ],
)
def test_a_damaged_filters_file_is_refused_naming_the_file(fitted, tmp_path, edit, message):
    record = fitted.to_json()
    edit(record)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record))
    with pytest.raises(GrafnError, match=message) as error:
        load_filters(path)
    assert str(path) in str(error.value)


def test_output_names_are_safe_and_distinct():
    assert output_name("a/b") != output_name("a_b") and "/" not in output_name("a/b")


# --- the command line ----------------------------------------------------------------------------


def _write_corpus(folder, extra_rows=()):
    rows = []
    for index, (gender, speaker, samples) in enumerate(corpus(4)):
        path = folder / "audio" / f"{index}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, samples, RATE, subtype="PCM_16")
        rows.append(Utterance(f"utt/{index}", str(path), "en", "words", gender, speaker, split="train", extra={"k": index}))
    for index, gender in enumerate(extra_rows):
        rows.append(Utterance(f"other-{index}", str(folder / "audio" / "0.wav"), "en", "words", gender, f"o{index}", split="test"))
    return write_manifest(folder / "manifest.jsonl", rows)


def test_fit_and_apply_keep_ids_and_metadata_and_count_what_they_pass_through(tmp_path, capsys):
    manifest = _write_corpus(tmp_path, extra_rows=("unknown", "other"))
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--split", "train", "--quiet"]) == 0
    assert "passed over (no binary label): 0" in capsys.readouterr().out
    out = tmp_path / "out" / "normalised.jsonl"
    argv = ["apply", "--filters", str(filters), "--manifest", str(manifest), "--audio-dir", str(tmp_path / "grafn-audio"), "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "8 of 10 utterances normalised (female 4, male 4; 0 done by an earlier run)" in printed
    assert "passed through unchanged, gender label 'unknown' is not binary: 1" in printed
    original, normalised = read_manifest(manifest), read_manifest(out)
    assert [u.id for u in normalised] == [u.id for u in original]
    for before, after in zip(original, normalised):
        assert (after.text, after.gender, after.speaker, after.split, after.language) == (
            before.text,
            before.gender,
            before.speaker,
            before.split,
            before.language,
        )
        assert after.extra["grafn"]["mode"] == "gender" and {k: v for k, v in after.extra.items() if k != "grafn"} == before.extra
    changed = [u for u in normalised if u.extra["grafn"]["filter"]]
    assert all(u.audio != o.audio for u, o in zip(normalised, original) if u in changed)
    assert Path(normalised[-1].audio).resolve() == Path(original[-1].audio).resolve() and normalised[-1].extra["grafn"]["filter"] is None
    audio = load_audio(changed[0].audio)
    assert audio.samples.shape == load_audio(original[0].audio).samples.shape
    # a rerun resumes: nothing is redone
    assert cli.main(argv) == 0
    assert "10 done by an earlier run" in capsys.readouterr().out


def test_label_free_modes_need_no_label(tmp_path, capsys):
    manifest = _write_corpus(tmp_path, extra_rows=("unknown",))
    filters = tmp_path / "filters.json"
    cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--quiet"])
    for mode in ("predicted", "utterance"):
        out = tmp_path / f"{mode}.jsonl"
        argv = [
            "apply",
            "--filters",
            str(filters),
            "--manifest",
            str(manifest),
            "--audio-dir",
            str(tmp_path / mode),
            "--out",
            str(out),
            "--by",
            mode,
            "--quiet",
        ]
        assert cli.main(argv) == 0
        rows = read_manifest(out)
        assert all(row.extra["grafn"]["filter"] is not None for row in rows)  # the unknown-label row is normalised too
    predicted = {row.id: row.extra["grafn"]["filter"] for row in read_manifest(tmp_path / "predicted.jsonl")}
    labels = {row.id: row.gender for row in read_manifest(manifest) if row.gender in ("female", "male")}
    assert all(predicted[i] == labels[i] for i in labels)  # the pitch rule is right on these voices


def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys):
    manifest = _write_corpus(tmp_path)
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(tmp_path / "missing.jsonl"), "--out", str(filters)]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--split", "dev", "--quiet"]) == 2
    assert "no utterance in split 'dev'" in capsys.readouterr().err
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--hop", "300", "--quiet"]) == 2
    assert "hop" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    argv = ["apply", "--manifest", str(manifest), "--audio-dir", str(tmp_path / "a"), "--out", str(tmp_path / "o.jsonl"), "--quiet"]
    assert cli.main([*argv, "--filters", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.json: not JSON" in err and err.count("\n") == 1
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--quiet"]) == 0
    assert cli.main([*argv, "--filters", str(filters)]) == 0
    assert cli.main([*argv, "--filters", str(filters), "--by", "utterance"]) == 2  # same audio dir, other mode
    assert "use a new --audio-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as error:
        cli.main([*argv, "--filters", str(filters), "--by", "nearest"])
    assert error.value.code == 2


def test_the_pitch_rule_needs_a_calibrated_threshold():
    noise = (0.1 * np.random.default_rng(0).standard_normal(RATE)).astype(np.float32)
    filters = fit_filters([("female", "a", noise), ("male", "b", noise)], GrafnParameters())
    assert filters.pitch_threshold_hz is None and filters.groups["female"]["median_f0_hz"] is None
    with pytest.raises(GrafnError, match="no pitch threshold"):
        choose_filter(filters, "predicted", "female", noise)
    assert choose_filter(filters, "gender", "female", noise).filter == "female"


def test_fit_can_calibrate_on_a_sample_per_gender(tmp_path, capsys):
    manifest = _write_corpus(tmp_path)
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--per-gender", "2", "--quiet"]) == 0
    loaded = load_filters(filters)
    assert loaded.groups["female"]["utterances"] == 2 and loaded.groups["male"]["utterances"] == 2
    assert loaded.calibration["per_gender"] == 2


def test_the_demo_section_and_figure_from_saved_results(tmp_path):
    from types import SimpleNamespace

    from experiments.demo.extras import grafn as stage

    def report(female, male):
        entry = {
            "groups": {"female": {"error_rate": female}, "male": {"error_rate": male}},
            "gap_relative": 100 * (female - male) / male,
            "delta_rel": 100 * (female - male) / (0.5 * (female + male)),
            "bootstrap": {"ci95": [None, None]},
            "gap_estimate": "resampled",
        }
        return {"languages": {"en": entry}}

    reports = {name: report(10.0 + i, 8.0) for i, name in enumerate(stage.CONDITIONS)}
    params = GrafnParameters()
    flat = [0.0] * len(params.frequencies)
    spectra = {
        "frequencies_hz": params.frequencies.tolist(),
        "conditions": {
            c: {"ltas_db": {"female": flat, "male": flat}, "distance": {"rms_db": 4.0 - i, "shape_rms_db": 3.0 - i, "level_db": 1.0}}
            for i, c in enumerate(stage.CONDITIONS)
        },
    }
    probe_scores = {name: dict.fromkeys(stage.PROBE_SITES, 70.0) for name in ("original", "gender")}
    histories = {
        (0.5, False): [
            {"step": 0, "wer_female": 20.0, "wer_male": 10.0},
            {"step": 8, "wer_female": 12.0, "wer_male": 9.0, "E": 33.3, "delta_rel": 28.6, "gap_abs": 3.0},
        ],
        (0.25, False): [  # written by the tracker before it named its gaps as the gap module does: E(0, 0) was 0
            {"step": 0, "wer_female": 0.0, "wer_male": 0.0},
            {"step": 8, "wer_female": 0.0, "wer_male": 0.0, "E": 0.0, "delta_rel": 0.0, "gap_abs": 0.0},
        ],
        (0.75, False): [
            {"step": 0, "wer_female": 0.0, "wer_male": 0.0},
            {"step": 8, "wer_female": 0.0, "wer_male": 0.0, "gap_relative_full": None, "E": None, "delta_rel": 0.0, "gap_absolute": 0.0},
        ],
    }
    figure = stage.draw(SimpleNamespace(out=tmp_path), spectra, reports, histories)
    assert all(path.exists() for path in figure)
    lines = stage.section(reports, {"predicted": "same audio"}, spectra, probe_scores, histories, ["python -m experiments.finetune ..."], figure, 12.0, 24)
    text = "\n".join(lines)
    assert "synthetic" in lines[0] and "| GRAFN by gender label | en | 11.0 | 8.0 | +37.5 |" in text
    assert "| GRAFN by pitch-rule gender † |" in text and "† same audio." in text
    assert "| 0.50 | no | 20.0 → 12.0 | 10.0 → 9.0 | +33.3 | +28.6 | +3.0 |" in text and "| 0.25 | yes | not run |" in text
    assert "python -m experiments.finetune ..." in text and "| GRAFN by gender label | 3.00 | 2.00 | +1.00 | 100 % |" in text
    # one E per table: each header names its estimate; no error in the male group leaves E n/a, never +0.0
    assert "| condition | language | WER F | WER M | E(F, M) (resampled) |" in text
    assert "| E(F, M) after (full set) |" in text
    assert "| 0.75 | no | 0.0 → 0.0 | 0.0 → 0.0 | n/a | +0.0 | +0.0 |" in text
    assert "| 0.25 | no | 0.0 → 0.0 | 0.0 → 0.0 | n/a | +0.0 | +0.0 |" in text


# --- outputs are finite or refused; degenerate audio is skipped or passed through, named -----------


@pytest.mark.parametrize("options", [{"output_rms": 1e39}, {"output_rms": 1e36}, {"max_gain_db": 800.0}])
def test_parameters_that_can_overflow_the_float32_output_are_refused(options):
    with pytest.raises(GrafnError, match="beyond the float32 samples of the output WAV"):
        GrafnParameters(**options)
    assert GrafnParameters(output_rms=1e30).peak_bound_log10() < 38.5  # a scale no audio needs, but it fits


@pytest.mark.parametrize("window", ["hann", "boxcar", "blackman"])
def test_the_peak_bound_bounds_the_worst_inputs(window):
    """An impulse (the largest |x_norm|, sqrt(W - 1)) and a square wave, every bin at the largest gain or alternating."""
    params = GrafnParameters(window=window, output_rms=1.0, floor_ratio=0.0)
    impulse = np.zeros(4000)
    impulse[2000] = 1.0
    impulse += 1e-3 * np.random.default_rng(0).standard_normal(4000)  # no constant stretch
    square = np.sign(np.sin(2 * np.pi * 50 * np.arange(4000) / RATE)) + 1e-3 * np.random.default_rng(1).standard_normal(4000)
    bins = len(params.frequencies)
    for samples in (impulse, square):
        for gain in (np.full(bins, params.max_gain_db), np.where(np.arange(bins) % 2, params.max_gain_db, -params.max_gain_db)):
            assert np.log10(np.abs(grafn(samples, gain, params)).max()) < params.peak_bound_log10()


def test_a_non_finite_output_is_refused_naming_the_utterance_and_nothing_is_written(tmp_path, monkeypatch):
    import experiments.normalisation.transform as transform

    manifest = _write_corpus(tmp_path)
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--quiet"]) == 0
    monkeypatch.setattr(transform, "rebalance", lambda normalised, gain_db, params: np.full(len(normalised), np.inf))
    argv = ["apply", "--filters", str(filters), "--manifest", str(manifest), "--audio-dir", str(tmp_path / "a"), "--out", str(tmp_path / "o.jsonl"), "--quiet"]
    with pytest.raises(GrafnError, match="utterance utt/0: the normalised waveform is not finite in float32"):
        apply_to_manifest(filters, manifest, tmp_path / "a", tmp_path / "o.jsonl")
    assert not list((tmp_path / "a").glob("*.wav")) and not (tmp_path / "o.jsonl").exists()
    assert cli.main(argv) == 2


def _with_degenerate_audio(folder):
    """The test corpus plus a constant (DC) file and a one-sample file, as training rows."""
    soundfile.write(folder / "dc.wav", np.full(RATE, 0.5, np.float32), RATE, subtype="FLOAT")
    soundfile.write(folder / "one.wav", np.array([0.5], np.float32), RATE, subtype="FLOAT")
    rows = read_manifest(_write_corpus(folder))
    rows += [Utterance(name, str(folder / f"{name.split('-')[1]}.wav"), "en", "words", "female", "fx", split="train") for name in ("bad-dc", "bad-one")]
    return write_manifest(folder / "degenerate.jsonl", rows)


def test_fit_skips_and_lists_constant_and_one_sample_audio(tmp_path, capsys):
    manifest = _with_degenerate_audio(tmp_path)
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(manifest), "--out", str(filters), "--quiet"]) == 0
    assert "skipped for bad audio: 2 (e.g. bad-dc: " in capsys.readouterr().out
    skipped = load_filters(filters).calibration["skipped_bad_audio"]
    assert [entry["id"] for entry in skipped] == ["bad-dc", "bad-one"]
    assert all("a constant waveform" in entry["problem"] for entry in skipped) and str(tmp_path / "dc.wav") in skipped[0]["problem"]
    assert load_filters(filters).groups["female"]["utterances"] == 4  # the corpus's four, not the two bad ones


@pytest.mark.parametrize("mode", ["gender", "utterance", "predicted"])
def test_apply_passes_constant_audio_through_and_counts_it(tmp_path, capsys, mode):
    manifest = _with_degenerate_audio(tmp_path)
    filters = tmp_path / "filters.json"
    assert cli.main(["fit", "--manifest", str(_write_corpus(tmp_path)), "--out", str(filters), "--quiet"]) == 0
    out = tmp_path / "out.jsonl"
    argv = ["apply", "--filters", str(filters), "--manifest", str(manifest), "--audio-dir", str(tmp_path / mode), "--out", str(out), "--by", mode, "--quiet"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "8 of 10 utterances normalised" in printed
    assert "passed through unchanged, a constant waveform (σ_x(t) is 0 everywhere): nothing to divide by: 2 (e.g. bad-dc, bad-one)" in printed
    rows = {row.id: row for row in read_manifest(out)}
    for name in ("dc", "one"):
        assert Path(rows[f"bad-{name}"].audio).resolve() == (tmp_path / f"{name}.wav").resolve()
        assert rows[f"bad-{name}"].extra["grafn"]["filter"] is None and "constant waveform" in rows[f"bad-{name}"].extra["grafn"]["reason"]
    assert cli.main(argv) == 0  # the rerun resumes past them
    assert "10 done by an earlier run" in capsys.readouterr().out
