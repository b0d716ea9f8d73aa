"""Gender-aware LoRA fine-tuning (experiments.finetuning, experiments.finetune) on a tiny random Whisper."""

import csv
import io
import json
import shutil
from contextlib import contextmanager, redirect_stdout
from dataclasses import replace

import numpy as np
import pytest
import soundfile
import torch

from experiments import finetune as cli
from experiments.finetuning.data import WhisperCollator, label_ids
from experiments.finetuning.module import LORA_MARKER, LoraOptions, add_lora
from experiments.finetuning.subsets import SubsetError, draw_subset, female_count
from experiments.finetuning.tracking import gender_metrics
from experiments.normalisation.calibration import fit_filters
from experiments.normalisation.transform import GrafnParameters
from extract.families.generation import GenerationOptions
from extract.manifest import Utterance, write_manifest
from extract.spec import ModelSpec, load_generator
from tests.tiny_whisper import save_tiny_whisper

RATE = 16_000


def _utterance(index: int, gender: str, speaker: str, split: str = "train", text: str | None = None) -> Utterance:
    return Utterance(f"{speaker}-{index}", f"{speaker}-{index}.wav", "en", text or f"sentence {index}", gender, speaker, split=split)


def _pool(per_speaker: int = 5) -> list[Utterance]:
    rows = []
    for gender in ("female", "male"):
        for speaker in range(3):
            rows += [_utterance(i, gender, f"{gender[0]}{speaker}") for i in range(per_speaker)]
    return rows + [_utterance(0, "unknown", "u0"), _utterance(1, "other", "o0")]


VALIDATION = [_utterance(90, "female", "fv", "dev", "held out words"), _utterance(91, "male", "mv", "dev", "sentence 4")]


# --- subsets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("share, females", [(0.25, 3), (0.5, 6), (0.75, 9), (0.0, 0), (1.0, 12)])
def test_a_subset_has_the_exact_female_share_and_only_binary_labels(share, females):
    subset = draw_subset(_pool(), share, 12, seed=0, validation=VALIDATION)
    assert len(subset) == 12 and sum(u.gender == "female" for u in subset) == females
    assert {u.gender for u in subset} <= {"female", "male"} and len({u.id for u in subset}) == 12


def test_a_subset_is_seeded_and_leaves_out_validation_sentences():
    first, again, other = (draw_subset(_pool(), 0.5, 12, seed, VALIDATION) for seed in (0, 0, 1))
    assert [u.id for u in first] == [u.id for u in again] and [u.id for u in first] != [u.id for u in other]
    assert all(u.text != "sentence 4" for u in first)  # a validation sentence
    kept = draw_subset(_pool(), 0.5, 30, 0, VALIDATION, exclude_validation_texts=False)
    assert sum(u.text == "sentence 4" for u in kept) == 6


def test_a_subset_is_speaker_disjoint_from_validation():
    with pytest.raises(SubsetError, match="speaker-disjoint"):
        draw_subset(_pool(), 0.5, 4, 0, [_utterance(99, "female", "f1", "dev")])


@pytest.mark.parametrize(
    "share, total, message",
    [
        (0.3, 5, "not a whole number"),
        (1.5, 4, "between 0 and 1"),
        (0.5, 0, "at least 1"),
        (0.75, 20, "15 female utterances wanted, the pool has 12 \\(3 more left out"),
    ],
)
def test_impossible_subsets_are_refused(share, total, message):
    with pytest.raises(SubsetError, match=message):
        draw_subset(_pool(), share, total, 0, VALIDATION)


def test_female_count_is_exact():
    assert female_count(2000, 0.25) == 500 and female_count(2000, 0.75) == 1500


def test_the_batch_order_is_a_function_of_the_seed_and_the_step():
    from experiments.finetuning.data import SeededBatches

    step = [0]
    batches = SeededBatches(7, 3, seed=0, position=lambda: step[0])
    first = list(batches)
    assert len(batches) == 3 and [len(batch) for batch in first] == [3, 3, 1] and sorted(sum(first, [])) == list(range(7))
    assert list(batches) == first  # no global random state read
    second = list(SeededBatches(7, 3, seed=0, position=lambda: 3))
    assert sorted(sum(second, [])) == list(range(7)) and second != first  # the next pass, reshuffled
    step[0] = 4  # resumed after step 4: the second pass without its first batch
    assert list(batches) == second[1:]
    assert list(SeededBatches(7, 3, seed=1, position=lambda: 0)) != first


# --- per-gender metrics --------------------------------------------------------------------------


def test_gender_metrics_match_a_hand_computed_example():
    rows = [
        {"id": "a", "reference": "cat dog cow hen", "hypothesis": "cat dog cow", "gender": "female", "speaker": "f", "language": "en"},
        {"id": "b", "reference": "owl bee", "hypothesis": "owl bee", "gender": "female", "speaker": "f", "language": "en"},
        {"id": "c", "reference": "fox elk", "hypothesis": "fox yak", "gender": "male", "speaker": "m", "language": "en"},
        {"id": "d", "reference": "ant", "hypothesis": "ant", "gender": "unknown", "speaker": "u", "language": "en"},
    ]
    metrics = gender_metrics(rows)
    assert metrics["wer_female"] == pytest.approx(100 / 6) and metrics["wer_male"] == pytest.approx(50.0)
    assert metrics["wer"] == pytest.approx(200 / 9)  # every row, the unknown one too
    assert metrics["gap_abs"] == pytest.approx(100 / 6 - 50)
    assert metrics["E"] == pytest.approx(100 * (100 / 6 - 50) / 50)
    assert metrics["delta_rel"] == pytest.approx(100 * (100 / 6 - 50) / (0.5 * (100 / 6 + 50)))
    assert np.isnan(gender_metrics(rows[:2])["E"]) and np.isnan(gender_metrics(rows[:2])["wer_male"])


def test_the_tracker_gives_the_gap_modules_full_set_estimate_under_its_names():
    """The tracker's E is E on the full set, named ``gap_relative_full`` as in asr_gap's JSON (150.0
    here, where the resampled estimate is 147.75); ``E`` and ``gap_abs`` stay as aliases; E is undefined
    when the male group makes no error (science audit D4, D5)."""
    from experiments.scoring.gaps import gap_report

    ref = "the quick brown fox jumps over the lazy dog"
    hypotheses = {
        "female": [
            "the quick brown fox jumps over the lazy cat",
            "the quick brown box jumps over a lazy dog",
            ref,
            "a quick brown fox jumped over the lazy dog",
            ref,
            ref,
        ],
        "male": [ref, "the quick brown fox jumps over the lazy cat", ref, ref, "the quick brown box jumps over the lazy dog", ref],
    }
    rows = [
        {"id": f"{g}{k}", "reference": ref, "hypothesis": h, "gender": g, "speaker": f"{g}{k % 3}", "language": "en"}
        for g, hs in hypotheses.items()
        for k, h in enumerate(hs)
    ]
    metrics = gender_metrics(rows)
    entry = gap_report(rows, ("female", "male"), 1000, 0)[0]["languages"]["en"]
    assert metrics["gap_relative_full"] == pytest.approx(150.0) == entry["gap_relative_full"]
    assert entry["gap_relative"] == pytest.approx(147.75, abs=0.01)  # the resampled estimate, another number
    assert metrics["gap_absolute"] == entry["gap_absolute"] and metrics["delta_rel"] == entry["delta_rel"]
    assert metrics["E"] == metrics["gap_relative_full"] and metrics["gap_abs"] == metrics["gap_absolute"]
    perfect = gender_metrics([row | {"hypothesis": ref} for row in rows])
    assert np.isnan(perfect["gap_relative_full"]) and np.isnan(perfect["E"]) and perfect["gap_absolute"] == 0.0


# --- a tiny random Whisper with a real tokenizer -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    """An English-only tiny random Whisper with tiny.en's tokenizer (labels and hypotheses are real text)."""
    return save_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))


@pytest.fixture(scope="module")
def noise_corpus(tmp_path_factory):
    """16 one-second noise clips: 12 train (3 speakers per gender), 4 dev (other speakers)."""
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    rows = []
    for index in range(16):
        gender = "female" if index % 2 else "male"
        split = "dev" if index >= 12 else "train"
        speaker = f"{gender[0]}{index % 3}" + ("-dev" if split == "dev" else "")
        path = root / "audio" / f"{index}.wav"
        path.parent.mkdir(exist_ok=True)
        soundfile.write(path, (0.1 * rng.standard_normal(RATE)).astype(np.float32), RATE)
        rows.append(Utterance(f"u{index}", str(path), "en", f"hello number {index % 3}", gender, speaker, split=split))
    return write_manifest(root / "manifest.jsonl", rows)


def test_labels_follow_whisper_s_prefix(tiny_whisper):
    generator = load_generator(ModelSpec("whisper", str(tiny_whisper), device="cpu"))
    tokenizer = generator.tokenizer
    ids = label_ids(tokenizer, "Hello there", "en", multilingual=False)
    assert tokenizer.convert_ids_to_tokens(ids[:2]) == ["<|startoftranscript|>", "<|notimestamps|>"] and ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == " Hello there"
    batch = WhisperCollator(generator.extractor.processor, tokenizer, False)(
        [
            (Utterance("a", "a.wav", "en", "hi", "female", "s"), np.zeros(RATE, dtype=np.float32)),
            (Utterance("b", "b.wav", "en", "a longer one", "male", "t"), np.zeros(800, dtype=np.float32)),
        ]
    )
    assert batch["input_features"].shape == (2, 80, 3000)
    assert batch["labels"][0, 0] == tokenizer.convert_tokens_to_ids("<|notimestamps|>")  # the start token is the model's to prepend
    assert (batch["labels"][0] == -100).sum() > 0 and (batch["labels"][1] == -100).sum() == 0


def test_only_the_adapters_train(tiny_whisper):
    model = load_generator(ModelSpec("whisper", str(tiny_whisper), device="cpu")).extractor.model
    peft_model = add_lora(model, LoraOptions(rank=4, alpha=8))
    trainable = [name for name, parameter in peft_model.named_parameters() if parameter.requires_grad]
    assert trainable and all(LORA_MARKER in name for name in trainable)
    assert {name.split(".lora_")[0].rsplit(".", 1)[-1] for name in trainable} == {"q_proj", "v_proj"}
    with pytest.raises(ValueError, match="no module named qkv"):
        add_lora(load_generator(ModelSpec("whisper", str(tiny_whisper), device="cpu")).extractor.model, LoraOptions(targets=("qkv",)))


def _argv(manifest, checkpoint, out, *extra):
    return [
        "--manifest", str(manifest), "--checkpoint", str(checkpoint), "--female-share", "0.5", "--total", "4", "--batch-size", "2",
        "--max-steps", "3", "--val-every", "2", "--warmup-steps", "1", "--lr", "0.01", "--max-new-tokens", "4", "--lora-rank", "4",
        "--lora-alpha", "8", "--keep-validation-sentences", "--device", "cpu", "--quiet", "--out", str(out), *extra,
    ]  # fmt: skip


def _tensors(folder):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


@pytest.fixture(scope="module")
def finished_run(tiny_whisper, noise_corpus, tmp_path_factory):
    """One short run with the GRAFN front end (3 steps, validation at steps 0, 2 and 3): its argv,
    folder and printed lines."""
    folder = tmp_path_factory.mktemp("finished")
    filters = fit_filters(
        [("female", "a", np.random.default_rng(1).standard_normal(RATE)), ("male", "b", np.random.default_rng(2).standard_normal(RATE))], GrafnParameters()
    )
    argv = _argv(noise_corpus, tiny_whisper, folder / "run", "--grafn", str(filters.save(folder / "filters.json")))
    with capture_stdout() as printed:
        assert cli.main(argv) == 0
    return argv, folder / "run", printed.getvalue()


@pytest.fixture
def copied_run(finished_run, tmp_path):
    """A copy of the finished run in this test's folder, and its argv pointing there."""
    argv, finished, _ = finished_run
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    argv = list(argv)
    argv[argv.index("--out") + 1] = str(out)
    return argv, out


@contextmanager
def capture_stdout():
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        yield buffer


def test_a_short_run_logs_per_gender_wer_and_saves_a_merged_model_that_transcribes(tiny_whisper, finished_run):
    _, out, printed = finished_run
    assert "step 0: WER" in printed and "step 2: WER" in printed and "step 3: WER" in printed
    history = [json.loads(line) for line in (out / "val_history.jsonl").read_text().splitlines()]
    assert [record["step"] for record in history] == [0, 2, 3]
    assert all(record["utterances_female"] == 2 and record["utterances_male"] == 2 for record in history)
    with next((out / "logs").glob("version_*/metrics.csv")).open() as handle:
        logged = [row for row in csv.DictReader(handle) if row["val/wer_female"]]
    assert len(logged) == 3 and {"val/wer_male", "val/E", "val/delta_rel", "val/gap_abs"} <= set(logged[0])
    run = json.loads((out / "run.json").read_text())
    assert run["seeds"] == {"subset": 0, "lightning": 0} and len(run["training_ids"]) == 4 and run["grafn_sha256"]
    model_dir = out / "model"
    assert (model_dir / "grafn-filters.json").is_file() and json.loads((model_dir / "finetune.json").read_text())["expects_grafn"]
    # only the adapted projections changed in the merged weights
    before, after = _tensors(tiny_whisper), _tensors(model_dir)
    assert before.keys() == after.keys()
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.endswith(("q_proj.weight", "v_proj.weight")) for name in changed)
    # the merged folder loads through the package and transcribes
    generator = load_generator(ModelSpec("whisper", str(model_dir), device="cpu"), GenerationOptions(max_new_tokens=4))
    hypotheses = generator.generate([np.zeros(RATE, dtype=np.float32)], "en", "asr")
    assert len(hypotheses) == 1 and isinstance(hypotheses[0], str)


@pytest.mark.filterwarnings("ignore:The dirpath has changed")  # the run folder was copied
def test_a_run_resumes_from_its_checkpoint_and_refuses_other_settings(copied_run, capsys):
    argv, out = copied_run
    merged = _tensors(out / "model")
    assert cli.main(argv) == 2
    assert "already holds a run; pass --resume" in capsys.readouterr().err
    assert cli.main([*argv, "--resume"]) == 0
    assert "finished already" in capsys.readouterr().out
    # a run killed before saving the model resumes from last.ckpt, whose adapters give the same merged model
    shutil.rmtree(out / "model")
    assert cli.main([*argv, "--resume"]) == 0
    resumed = _tensors(out / "model")
    assert all(torch.equal(merged[name], resumed[name]) for name in merged)
    assert cli.main([*argv, "--seed", "1", "--resume"]) == 2
    assert "records other settings (config, seeds, training_ids differ)" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:The dirpath has changed")  # the run folder was copied
def test_a_history_record_cut_by_a_kill_is_dropped_and_redone_and_every_step_is_kept(copied_run, capsys):
    """#63: the record written after a resume was appended to the cut line, losing both steps."""
    from experiments.finetuning.tracking import read_history

    argv, out = copied_run
    history = out / "val_history.jsonl"
    lines = history.read_text().splitlines()
    history.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30])  # killed while writing the step-3 record
    shutil.rmtree(out / "model")  # ... before the model was saved
    assert cli.main([*argv, "--resume"]) == 0
    assert f"{history}:3: removed an incomplete last line" in capsys.readouterr().err
    records = [json.loads(line) for line in history.read_text().splitlines()]  # every line is a record again
    assert [record["step"] for record in records] == [record["step"] for record in read_history(history)] == [0, 2, 3]
    assert records[:2] == [json.loads(line) for line in lines[:2]] and not (out / "val_history.jsonl.lock").exists()


REFUSED = {  # flag -> value -> what the one error line says
    "--female-share": {"0.3": "not a whole number"},
    "--total": {"40": "wanted, the pool has"},
    "--val-split": {"test": "no validation utterance"},
    "--lora-rank": {"0": "LoRA rank"},
    "--checkpoint": {"/no/such/folder": "no such folder"},
    "--grafn": {"/no/such/filters.json": "no such filters file"},
    "--lr": {
        "nan": "--lr must be a finite number > 0 (at most 3.4e+37: AdamW's first step, lr / (1 - β1), is a float32), got nan",
        "inf": "--lr must be a finite number > 0",
        "0": "--lr must be a finite number > 0",
        "1e38": "got 1e+38",
    },
    "--weight-decay": {
        "nan": "--weight-decay must be a finite number >= 0 (0: no decay",
        "-0.1": "--weight-decay must be a finite number >= 0",
        "1e300": "lr x weight decay at most 3.4e+38",
    },
}


@pytest.mark.parametrize("change, message", [([flag, value], message) for flag, values in REFUSED.items() for value, message in values.items()])
def test_cli_errors_are_one_line_with_status_2(tiny_whisper, noise_corpus, tmp_path, capsys, change, message):
    assert cli.main([*_argv(noise_corpus, tiny_whisper, tmp_path / "run"), *change]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()  # refused before anything is written: the corrected rerun starts as if nothing happened


def test_a_validation_sample_is_balanced_and_seeded():
    from experiments.finetuning.run import FinetuneError, balanced_sample

    pool = _pool()
    sample = balanced_sample(pool, 6, seed=0)
    assert sum(u.gender == "female" for u in sample) == 3 and sum(u.gender == "male" for u in sample) == 3
    assert [u.id for u in sample] == [u.id for u in balanced_sample(pool, 6, seed=0)]
    with pytest.raises(FinetuneError, match="even number"):
        balanced_sample(pool, 5, seed=0)
    with pytest.raises(FinetuneError, match="needs 20 female"):
        balanced_sample(pool, 40, seed=0)


# --- resume equals an uninterrupted run; refusals leave nothing behind ---------------------------


class _Killed(Exception):
    """Stands for a kill -9 right after a checkpoint (and its validation)."""


def _resume_argv(manifest, checkpoint, out):
    argv = _argv(manifest, checkpoint, out, "--no-validate-before", "--val-size", "2")
    for flag, value in (("--total", "6"), ("--max-steps", "5")):
        argv[argv.index(flag) + 1] = value
    return argv  # 3 batches per epoch; checkpoints at steps 2 and 4, the last one mid-epoch


@pytest.fixture(scope="module")
def uninterrupted_run(tiny_whisper, noise_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    with capture_stdout():
        assert cli.main(_resume_argv(noise_corpus, tiny_whisper, out)) == 0
    return out


@pytest.mark.parametrize(
    "killed_at, checkpoint_step",
    [
        (("on_train_batch_start", 2), 2),  # after the step-2 checkpoint, mid-pass (3 batches per pass)
        (("on_train_batch_start", 4), 4),  # after the step-4 checkpoint, in the second pass
        (("on_validation_start", 4), 2),  # during the step-4 validation: its row and checkpoint are not written yet
    ],
)
def test_a_killed_run_resumes_to_the_uninterrupted_weights_and_history(
    tiny_whisper, noise_corpus, uninterrupted_run, tmp_path, monkeypatch, killed_at, checkpoint_step
):
    """The data order and the dropout RNG continue where the checkpoint left them: the merged model is
    bit-identical to the uninterrupted run's (LoRA dropout 0.05 is on, so the RNG matters), and the
    history has the same rows, none missing and none twice."""
    out = tmp_path / "run"
    argv = _resume_argv(noise_corpus, tiny_whisper, out)
    with monkeypatch.context() as patch:
        _kill_at(patch, *killed_at)
        with pytest.raises(_Killed), capture_stdout():
            cli.main(argv)
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == checkpoint_step
    with capture_stdout():
        assert cli.main([*argv, "--resume"]) == 0
    reference, resumed = _tensors(uninterrupted_run / "model"), _tensors(out / "model")
    assert [name for name in reference if not torch.equal(reference[name], resumed[name])] == []
    assert _history(out) == _history(uninterrupted_run)
    with (out / "logs" / "version_1" / "metrics.csv").open() as handle:  # the resumed part trained the remaining steps only
        assert sum(bool(row["train/loss"]) for row in csv.DictReader(handle)) == 5 - checkpoint_step


def _history(out):
    return [json.loads(line) for line in (out / "val_history.jsonl").read_text().splitlines()]


def _kill_at(monkeypatch, hook, step):
    """Make the next run stop (as if killed) in the module's ``hook`` once ``step`` steps are trained
    (``on_train_batch_start``: about to train the next step; ``on_validation_start``: starting that
    step's validation)."""
    from experiments.finetuning.module import WhisperLora

    def kill(self, *args):
        if self.global_step == step and self.trainer.state.fn == "fit":
            raise _Killed

    monkeypatch.setattr(WhisperLora, hook, kill, raising=False)


def test_a_run_stopped_before_its_first_checkpoint_starts_over_even_with_other_settings(
    tiny_whisper, noise_corpus, uninterrupted_run, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    argv = _resume_argv(noise_corpus, tiny_whisper, out)
    with monkeypatch.context() as patch:
        _kill_at(patch, "on_train_batch_start", 1)
        with pytest.raises(_Killed):
            cli.main([*argv, "--seed", "1"])  # a failed start with other settings: run.json, no checkpoint
        with pytest.raises(_Killed):
            cli.main([*argv, "--resume"])  # the corrected rerun is not blocked: it replaces the untrained run
    assert "holds a run with other settings (config, seeds, training_ids) that stopped before its first checkpoint; replacing it" in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["seeds"]["subset"] == 0 and not (out / "checkpoints" / "last.ckpt").exists()
    assert cli.main(argv) == 0  # killed again before its first checkpoint: the same run starts over, without --resume too
    reference, rerun = _tensors(uninterrupted_run / "model"), _tensors(out / "model")
    assert all(torch.equal(reference[name], rerun[name]) for name in reference)
    assert _history(out) == _history(uninterrupted_run)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda path: path.write_bytes(path.read_bytes()[:10_000]), "not a readable checkpoint (OSError: [Errno 22] Invalid argument), damaged or cut short"),
        (lambda path: path.write_bytes(b""), "not a readable checkpoint (EOFError: empty or cut short)"),
        (lambda path: _add_payload(path), "refused unread, it holds other objects than tensors and plain data (Trying to load unsupported GLOBAL"),
        (lambda path: torch.save({"state_dict": {}}, path), "not a Lightning checkpoint of a fine-tuning run"),
    ],
)
def test_a_damaged_or_hostile_checkpoint_is_one_line(noise_corpus, tiny_whisper, uninterrupted_run, tmp_path, capsys, damage, message):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted_run, out)
    shutil.rmtree(out / "model")
    damage(out / "checkpoints" / "last.ckpt")
    assert cli.main([*_resume_argv(noise_corpus, tiny_whisper, out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / 'checkpoints' / 'last.ckpt'}: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "PWNED").exists()


def _add_payload(path):
    """#59: a pickled call to os.system added to a real checkpoint."""
    import os

    checkpoint = torch.load(path, weights_only=True)
    checkpoint["evil"] = type("Evil", (), {"__reduce__": lambda self: (os.system, (f"touch {path.parent.parent.parent / 'PWNED'}",))})()
    torch.save(checkpoint, path)


def test_unusable_audio_in_the_subset_is_refused_before_anything_is_written(noise_corpus, tiny_whisper, tmp_path, capsys):
    from extract.manifest import read_manifest

    (tmp_path / "corrupt.wav").write_bytes(b"RIFF\0\0\0\0WAVEfmt garbage" * 10)
    rows = [replace(u, audio=str(tmp_path / "corrupt.wav")) if u.split == "train" else u for u in read_manifest(noise_corpus)]
    manifest = write_manifest(tmp_path / "corrupt.jsonl", rows)
    out = tmp_path / "run"
    assert cli.main(_argv(manifest, tiny_whisper, out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 4 training utterance(s) have unusable audio, e.g. u") and "corrupt.wav" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_diverging_run_names_the_step_and_saves_nothing_non_finite(noise_corpus, tiny_whisper, tmp_path, capsys):
    out = tmp_path / "run"
    argv = _argv(noise_corpus, tiny_whisper, out, "--no-validate-before")
    argv[argv.index("--lr") + 1] = "3e37"  # AdamW's first step puts the adapters near 3e38; the forward pass of step 2 overflows
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == "error: the training loss is nan at step 2: training diverged and nothing from this step on is saved; rerun with a lower --lr than 3e+37\n"
    assert not (out / "checkpoints" / "last.ckpt").exists() and not (out / "model").exists()
    argv[argv.index("--lr") + 1] = "0.01"
    argv[argv.index("--max-steps") + 1] = "1"
    with capture_stdout():
        assert cli.main(argv) == 0  # the corrected rerun, into the same folder
    assert all(torch.isfinite(tensor).all() for tensor in _tensors(out / "model").values())


def test_the_random_state_survives_a_weights_only_checkpoint(tmp_path):
    import random

    from experiments.finetuning.module import random_state, set_random_state

    torch.save({"random_state": random_state()}, tmp_path / "state.ckpt")
    expected = (torch.rand(3), np.random.random(3), [random.random() for _ in range(3)])
    set_random_state(torch.load(tmp_path / "state.ckpt", weights_only=True)["random_state"])
    again = (torch.rand(3), np.random.random(3), [random.random() for _ in range(3)])
    assert torch.equal(expected[0], again[0]) and np.array_equal(expected[1], again[1]) and expected[2] == again[2]


def test_non_finite_adapters_are_never_saved(tiny_whisper, tmp_path):
    from experiments.finetuning.module import TrainingDiverged, WhisperLora
    from experiments.finetuning.run import FinetuneConfig, FinetuneError, save_merged

    with pytest.raises(TrainingDiverged, match="1 adapter tensor\\(s\\) hold non-finite values at step 0, e.g. a.lora_B.weight"):
        WhisperLora(None, None).on_save_checkpoint({"state_dict": {"a.lora_A.weight": torch.ones(2), "a.lora_B.weight": torch.tensor([1.0, float("inf")])}})
    generator = load_generator(ModelSpec("whisper", str(tiny_whisper), device="cpu"))
    model = add_lora(generator.extractor.model, LoraOptions(rank=4, alpha=8))
    next(parameter for name, parameter in model.named_parameters() if "lora_B" in name).data.fill_(float("nan"))
    with pytest.raises(FinetuneError, match="the merged model holds non-finite values in 1 tensor"):
        save_merged(WhisperLora(model, generator), generator, tmp_path / "model", FinetuneConfig(manifest="m", female_share=0.5, total=2), [])
    assert not (tmp_path / "model").exists()


def test_a_step_already_in_the_history_is_not_recorded_twice(tmp_path):
    """A run killed after a validation's record but before its checkpoint validates that step again on
    resume: the history keeps one record per step (h4's window between the two writes)."""
    from types import SimpleNamespace

    from experiments.finetuning.tracking import GenderGapTracker, history_log, read_history

    rows = [
        {"id": f"{g}{k}", "reference": "a b c d", "hypothesis": "a b c x" if k == 0 else "a b c d", "gender": g, "speaker": f"{g}{k}", "language": "en"}
        for g in ("female", "male")
        for k in range(2)
    ]
    module = SimpleNamespace(log_dict=lambda metrics: None)
    path = tmp_path / "val_history.jsonl"
    for _ in range(2):  # the first run, then the resumed one reaching the same step
        with history_log(path) as history:
            tracker = GenderGapTracker(history)
            tracker.on_validation_epoch_start(None, module)
            tracker.on_validation_batch_end(None, module, {"rows": rows}, None, 0)
            tracker.on_validation_epoch_end(SimpleNamespace(sanity_checking=False, global_step=4, current_epoch=0), module)
    assert [record["step"] for record in read_history(path)] == [4]
