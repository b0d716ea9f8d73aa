"""Whisper transcription on a GPU by three engines on the same clips: ours (``transcribe --engine
ctranslate2``), faster-whisper's batched pipeline, and transformers batched with SDPA attention.

The model has Whisper's ``--dims`` (``large-v3``: 32 + 32 layers of 1280, 128 mel bins) with random
weights, saved with the bundled base's tokenizer and a multilingual generation config, so that the
device machine needs no hub: throughput only, the texts are noise. Each engine decodes greedily
at most ``--max-new-tokens`` tokens with English and transcription forced. The clips are
``benchmarks/extraction.py``'s synthetic voices (3-15 s). faster-whisper batches the 30 s chunks of
one audio, so its input is the clips end to end with ``clip_timestamps`` at their bounds (one chunk
per clip, ``batch_size`` chunks at once, no VAD). Each engine runs once to warm up, then
``--rounds`` times; the median is reported, with the tokens of the texts each decoded (re-tokenized alike;
random weights stop at different lengths on each engine, so tokens per second is the fairer rate).

    python benchmarks/whisper_engines.py --device cuda --dims large-v3 --clips 64 --batch-size 16 --json out.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/whisper_engines.py --device cpu --dims tiny --clips 4 --batch-size 2 --rounds 1  # dry run
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extraction import DIMS, synthetic_voices  # noqa: E402

ENGINES = ("ours", "faster-whisper", "transformers-sdpa")
TINY = {"d_model": 64, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 128, "num_mel_bins": 80, "vocab_size": 51865}


def random_whisper(folder: Path, dims: dict) -> Path:
    """A random-weights Whisper of ``dims`` (as many decoder layers as encoder layers), the bundled
    base's tokenizer (its vocabulary: 51865) and a generation config forcing any language and task."""
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizerFast

    from extract.weights import bundled_tokenizer_file

    tokenizer = WhisperTokenizerFast(tokenizer_file=str(bundled_tokenizer_file("base")))
    ids = tokenizer.convert_tokens_to_ids
    end, start = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    layers, heads, ffn = dims["encoder_layers"], dims["encoder_attention_heads"], dims["encoder_ffn_dim"]
    config = WhisperConfig(
        **(dims | {"vocab_size": len(tokenizer)}),
        decoder_layers=layers,
        decoder_attention_heads=heads,
        decoder_ffn_dim=ffn,
        pad_token_id=end,
        bos_token_id=end,
        eos_token_id=end,
        decoder_start_token_id=start,
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=start,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        max_length=448,
        no_timestamps_token_id=ids("<|notimestamps|>"),
        begin_suppress_tokens=[],
        suppress_tokens=[],
        is_multilingual=True,
        lang_to_id={"<|en|>": ids("<|en|>")},
        task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
    )
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=dims["num_mel_bins"]).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def text_tokens(tokenizer, texts: list[str]) -> int:
    """The tokens of the texts an engine decoded, counted alike for every engine (re-tokenized, no special tokens)."""
    return sum(len(tokenizer(text.strip(), add_special_tokens=False)["input_ids"]) for text in texts)


def timed(run, rounds: int) -> tuple[float, list[float], int]:
    """Median seconds of ``rounds`` calls after one warm-up, every round's seconds, and the tokens of the last call."""
    run()
    seconds, tokens = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        tokens = run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), seconds, tokens


def ours(checkpoint: Path, audios: list, args) -> tuple:
    from extract.families.generation import GenerationOptions
    from extract.spec import ModelSpec, load_generator

    options = GenerationOptions(num_beams=1, max_new_tokens=args.max_new_tokens, engine="ctranslate2", compute_type=args.compute_type)
    generator = load_generator(ModelSpec("whisper", str(checkpoint), device=args.device), options)

    def run() -> int:
        texts = [text for at in range(0, len(audios), args.batch_size) for text in generator.generate(audios[at : at + args.batch_size], "en", "asr")]
        return text_tokens(generator.tokenizer, texts)

    return timed(run, args.rounds), generator.compute_type


def faster_whisper_batched(checkpoint: Path, audios: list, args, compute_type: str) -> tuple:
    from faster_whisper import BatchedInferencePipeline, WhisperModel
    from transformers import AutoTokenizer

    from extract.families.whisper_ct2 import converted_model
    from extract.spec import ModelSpec

    folder = Path(tempfile.mkdtemp()) / "faster-whisper"
    shutil.copytree(converted_model(ModelSpec("whisper", str(checkpoint), device=args.device)), folder)
    for name in ("tokenizer.json", "preprocessor_config.json"):
        shutil.copy(checkpoint / name, folder / name)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    pipeline = BatchedInferencePipeline(WhisperModel(str(folder), device=args.device, compute_type=compute_type))
    joined = np.concatenate(audios)
    bounds = np.cumsum([0, *(len(audio) for audio in audios)])
    clips = [{"start": start / 16_000, "end": end / 16_000} for start, end in zip(bounds[:-1], bounds[1:])]  # in seconds

    def run() -> int:
        segments, _ = pipeline.transcribe(
            joined,
            language="en",
            task="transcribe",
            beam_size=1,
            vad_filter=False,
            clip_timestamps=clips,
            batch_size=args.batch_size,
            max_new_tokens=args.max_new_tokens,
            without_timestamps=True,
            suppress_blank=False,
            suppress_tokens=[],
        )
        return text_tokens(tokenizer, [segment.text for segment in segments])

    return timed(run, args.rounds)


def transformers_sdpa(checkpoint: Path, audios: list, args) -> tuple:
    import torch
    from transformers import AutoTokenizer, WhisperFeatureExtractor, WhisperForConditionalGeneration

    dtype = torch.float16 if args.device.startswith("cuda") else torch.float32
    model = WhisperForConditionalGeneration.from_pretrained(checkpoint, dtype=dtype, attn_implementation="sdpa").to(args.device).eval()
    features, tokenizer = WhisperFeatureExtractor.from_pretrained(checkpoint), AutoTokenizer.from_pretrained(checkpoint)

    def run() -> int:
        tokens = 0
        for at in range(0, len(audios), args.batch_size):
            inputs = features(audios[at : at + args.batch_size], sampling_rate=16_000, return_tensors="pt").input_features.to(args.device, dtype)
            with torch.inference_mode():
                out = model.generate(inputs, language="en", task="transcribe", num_beams=1, max_new_tokens=args.max_new_tokens)
            tokens += text_tokens(tokenizer, tokenizer.batch_decode(out, skip_special_tokens=True))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return tokens

    return timed(run, args.rounds), model.config._attn_implementation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", choices=("tiny", *DIMS), default="large-v3")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--clips", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--compute-type", help="ours and faster-whisper (default: the device's, float16 on a GPU, int8 on a CPU)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import soundfile

    work = Path(tempfile.mkdtemp())
    checkpoint = random_whisper(work / "model", TINY if args.dims == "tiny" else DIMS[args.dims])
    manifest = synthetic_voices(work / "clips", args.clips)
    audios = [soundfile.read(json.loads(line)["audio"], dtype="float32")[0] for line in manifest.read_text().splitlines()]
    seconds_of_audio = sum(len(audio) for audio in audios) / 16_000
    print(f"{args.clips} clips ({seconds_of_audio:.0f} s of audio), whisper {args.dims} random weights, {args.device}, batch {args.batch_size}", flush=True)
    rows, compute_type = [], args.compute_type
    for engine in args.engines:
        if engine == "ours":
            (median, rounds, tokens), compute_type = ours(checkpoint, audios, args)
            detail = f"ctranslate2 {compute_type}"
        elif engine == "faster-whisper":
            from extract.families.whisper_ct2 import default_compute_type

            compute_type = compute_type or default_compute_type(args.device)
            median, rounds, tokens = faster_whisper_batched(checkpoint, audios, args, compute_type)
            detail = f"BatchedInferencePipeline {compute_type}"
        else:
            (median, rounds, tokens), attention = transformers_sdpa(checkpoint, audios, args)
            detail = f"attention {attention}"
        row = {"engine": engine, "detail": detail, "seconds": round(median, 3), "rounds": [round(s, 3) for s in rounds], "tokens": tokens}
        row |= {"clips_per_second": round(args.clips / median, 2), "tokens_per_second": round(tokens / median, 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("| engine | clips/s | tokens/s | seconds (median) | tokens |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['engine']} ({row['detail']}) | {row['clips_per_second']} | {row['tokens_per_second']} | {row['seconds']} | {row['tokens']} |")
    if args.json:
        args.json.write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
