"""The ``ssl`` family downstream: CTC transcription through ``transcribe`` into ``asr_gap``, the
refusals of what a CTC model cannot do, steering and erasing at SSL sites, and ``patch`` scored by
CTC WER; all on the family's tiny random model (a Wav2Vec2ForCTC, offline)."""

import json

import numpy as np
import soundfile

from experiments import asr_gap as gap_cli
from experiments import decoder_states as decoder_cli
from experiments import patch as patch_cli
from experiments import transcribe as transcribe_cli
from extract.families import tiny_extractor
from extract.interventions import Intervener, Intervention, runtime_model_identity
from extract.manifest import Utterance, write_manifest
from tests.commands import one_line_error

RATE = 16_000
DIM = 16  # the tiny model's hidden size
TINY = ["--family", "ssl", "--checkpoint", "tiny-random", "--device", "cpu", "--quiet"]


def _manifest(root, speakers=(("F1", "female"), ("M1", "male"), ("F2", "female"), ("M2", "male"), ("F3", "female"), ("M3", "male"))):
    rng = np.random.default_rng(0)
    utterances = []
    for number, (speaker, gender) in enumerate(speakers):
        path = root / f"{speaker}.wav"
        soundfile.write(path, rng.normal(0, 0.1, int((0.5 + 0.1 * number) * RATE)).astype(np.float32), RATE)
        utterances.append(Utterance(id=speaker.lower(), audio=str(path), language="fr", text="le chat", gender=gender, speaker=speaker))
    return write_manifest(root / "m.jsonl", utterances)


def test_ctc_transcripts_have_whispers_rows_and_feed_asr_gap(tmp_path, capsys):
    manifest, hypotheses = _manifest(tmp_path), tmp_path / "h.jsonl"
    assert transcribe_cli.main([*TINY, "--task", "asr", "--manifest", str(manifest), "--out", str(hypotheses)]) == 0
    rows = [json.loads(line) for line in hypotheses.read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == ["f1", "f2", "f3", "m1", "m2", "m3"]
    assert set(rows[0]) == {"id", "reference", "hypothesis", "gender", "speaker", "language", "model", "task", "tgt_lang", "dataset"}
    assert rows[0]["model"] == "tiny-random-ssl" and rows[0]["reference"] == "le chat" and all(row["hypothesis"] for row in rows)
    settings = json.loads((tmp_path / "h.jsonl.settings.json").read_text())
    assert settings["family"] == "ssl" and settings["decoding"]["decoding"].startswith("greedy CTC")
    out = tmp_path / "gap.json"
    assert gap_cli.main(["--hypotheses", str(hypotheses), "--out", str(out), "--iterations", "20"]) == 0
    result = json.loads(out.read_text())
    text = json.dumps(result)
    assert '"delta_rel"' in text and '"bootstrap"' in text and '"gap_relative"' in text
    assert result["subject"]["model"] == "tiny-random-ssl"


def test_translation_and_decoder_states_are_refused_in_one_line(tmp_path, capsys):
    manifest = _manifest(tmp_path)
    st = one_line_error(
        transcribe_cli.main, [*TINY, "--task", "st", "--tgt-lang", "en", "--manifest", str(manifest), "--out", str(tmp_path / "h.jsonl")], capsys
    )
    assert st == "error: a CTC model has no text decoder and cannot translate: --task asr only (it transcribes the language it was fine-tuned on)"
    beams = one_line_error(
        transcribe_cli.main, [*TINY, "--task", "asr", "--num-beams", "4", "--manifest", str(manifest), "--out", str(tmp_path / "b.jsonl")], capsys
    )
    assert beams.startswith("error: CTC decoding is greedy")
    decoder = one_line_error(decoder_cli.main, [*TINY, "--task", "asr", "--manifest", str(manifest), "--out", str(tmp_path / "d")], capsys)
    assert decoder.startswith("error: ssl has no text decoder in its model (a CTC head reads the encoder's frames")


def _steer(extractor, site, alpha=0.7):
    identity = runtime_model_identity(extractor, site) | {"hidden_size": DIM}
    return Intervention(
        "steer",
        site,
        identity,
        {"path": "s", "content_sha256": "x"},
        {"direction": np.linspace(-1, 1, DIM)},
        alpha=alpha,
        target="female",
        fit={"method": "mean-diff"},
    )


def test_steering_at_an_ssl_layer_moves_that_layer_and_what_follows(tmp_path):
    extractor = tiny_extractor("ssl")
    rng = np.random.default_rng(1)
    audios = [rng.normal(0, 0.1, int(seconds * RATE)).astype(np.float32) for seconds in (0.8, 0.5)]
    sites = ["encoder.embed", "encoder.layer.0", "encoder.layer.1"]
    plain = extractor.extract(audios, sites)
    intervener = Intervener([_steer(extractor, "encoder.layer.0").save(tmp_path / "s.safetensors")], gender="female")
    with intervener.installed(extractor), intervener.batch(["female", "male"], [len(a) for a in audios]):
        edited = extractor.extract(audios, sites)
    for site in sites:  # the male row is untouched
        np.testing.assert_array_equal(edited[1][site], plain[1][site])
    np.testing.assert_array_equal(edited[0]["encoder.embed"], plain[0]["encoder.embed"])
    np.testing.assert_allclose(edited[0]["encoder.layer.0"], plain[0]["encoder.layer.0"] + 0.7 * np.linspace(-1, 1, DIM), atol=1e-5)
    assert not np.allclose(edited[0]["encoder.layer.1"], plain[0]["encoder.layer.1"], atol=1e-3)


def test_an_eraser_at_the_convolutional_output_edits_the_feature_projections_input(tmp_path):
    extractor = tiny_extractor("ssl")
    rng = np.random.default_rng(2)
    unit = rng.standard_normal(DIM)
    unit /= np.linalg.norm(unit)
    identity = runtime_model_identity(extractor, "encoder.cnn") | {"hidden_size": DIM}
    tensors = {"proj_left": unit[:, None], "proj_right": unit[None, :], "bias": rng.standard_normal(DIM)}
    eraser = Intervention("erase", "encoder.cnn", identity, {"path": "s", "content_sha256": "x"}, tensors, fit={"method": "leace"})
    audios = [rng.normal(0, 0.1, int(0.6 * RATE)).astype(np.float32)]
    (plain,) = extractor.extract(audios, ["encoder.cnn", "encoder.embed"])
    intervener = Intervener([eraser.save(tmp_path / "e.safetensors")])
    with intervener.installed(extractor), intervener.batch(["female"], [len(audios[0])]):
        (edited,) = extractor.extract(audios, ["encoder.cnn", "encoder.embed"])
    np.testing.assert_allclose(edited["encoder.cnn"], eraser.apply(plain["encoder.cnn"]), atol=1e-5)
    assert not np.allclose(edited["encoder.embed"], plain["encoder.embed"], atol=1e-3)


def test_patching_an_ssl_layer_is_scored_by_ctc_word_errors(tmp_path, capsys):
    manifest = _manifest(tmp_path)
    out = tmp_path / "p.jsonl"
    argv = [*TINY, "--manifest", str(manifest), "--sites", "encoder.layer.1", "--pairs", "cross", "--iterations", "10", "--out", str(out)]
    assert patch_cli.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines() if '"patch_row"' in line]
    assert len(rows) == 6 and {row["site"] for row in rows} == {"encoder.layer.1"}
    for row in rows:
        scores = row["asr"]
        assert scores["reference_length"] == 2 and scores["plain_errors"] >= 0 and scores["patched_errors"] >= 0
    assert all(row["patched"]["end"] > 0 for row in rows) and any(row["hypothesis"] != row["plain_hypothesis"] for row in rows)


SSL_STUDY = """\
name: ssl
out: runs/ssl
device: cpu
models:
  - {name: tiny, family: ssl, checkpoint: tiny-random}
corpora:
  - {name: toy, task: asr, manifests: {en: toy-en.jsonl}}
sites: all
probes:
  - {probes: [positional, mean], controls: [none, shuffled], seeds: [0], positions: 10, mdl: true}
  - {probes: [mean], controls: [none], seeds: [0], split: loso}
behaviour: {gap: {iterations: 10}}
"""


def test_a_study_of_the_tiny_ssl_model_probes_every_site_with_controls_mdl_and_loso_beside_its_ctc_gap(tmp_path, capsys):
    """The probes, controls, MDL and LOSO run on SSL stores as on Whisper's, and the CTC transcripts give the gap."""
    from experiments.study.__main__ import main as study_main
    from tests.experiments.study.test_study import write_four_voices

    write_four_voices(tmp_path)
    study = tmp_path / "ssl.yaml"
    study.write_text(SSL_STUDY)
    assert study_main(["run", str(study), "--quiet"]) == 0, capsys.readouterr()
    out = tmp_path / "runs" / "ssl"
    rows = [json.loads(line) for path in (out / "probes").rglob("*.jsonl") for line in path.read_text().splitlines()]
    sites = {"encoder.cnn", "encoder.embed", "encoder.layer.0", "encoder.layer.1", "encoder.final"}
    kinds = {(row["config"]["probe"], row["config"]["control"], row["config"]["mdl"], row["config"]["split"]) for row in rows}
    assert {row["config"]["site"] for row in rows} == sites
    assert {("positional", "shuffled", True, "fixed"), ("mean", "none", True, "fixed"), ("mean", "none", False, "loso")} <= kinds
    gap = json.loads(next((out / "behaviour").rglob("gap-*.json")).read_text())
    assert "delta_rel" in json.dumps(gap) and gap["subject"]["family"] == "ssl"


def test_steering_a_padded_batch_of_data2vec_audio_edits_each_row_as_when_it_is_alone(tmp_path):
    """The conformer and data2vec-audio keep whole padded batches (their padding is zeroed, not split
    off), so a gendered intervention edits the rows it names in one batch as it does one by one."""
    from extract.families.ssl import SSLExtractor, tiny_ssl_model

    model, processor = tiny_ssl_model("data2vec-audio")
    extractor = SSLExtractor(model, processor, checkpoint="tiny-data2vec-audio")
    rng = np.random.default_rng(3)
    audios = [rng.normal(0, 0.1, int(seconds * RATE)).astype(np.float32) for seconds in (0.8, 0.5)]
    intervener = Intervener([_steer(extractor, "encoder.layer.0").save(tmp_path / "s.safetensors")], gender="female")
    with intervener.installed(extractor), intervener.batch(["male", "female"], [len(a) for a in audios]):
        together = extractor.extract(audios, ["encoder.layer.1"])
    for index, gender in enumerate(("male", "female")):
        with intervener.installed(extractor), intervener.batch([gender], [len(audios[index])]):
            (alone,) = extractor.extract([audios[index]], ["encoder.layer.1"])
        np.testing.assert_allclose(together[index]["encoder.layer.1"], alone["encoder.layer.1"], atol=1e-5)
