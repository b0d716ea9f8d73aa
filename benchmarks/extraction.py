"""Extraction throughput against its bounds, in one run: ours, the published approach, the encoder, the disk.

Every site of a Whisper encoder (``--family whisper``, the default) or of a wav2vec 2.0 encoder
(``--family ssl``: ``extract.families.ssl``) over synthetic voices (harmonic, F0 by gender, 3-15 s),
measured side by side on one machine:

- ``ours``: ``extract.runner.run_extraction`` in process (model load excluded), float16 stores;
- ``ours-warm``: the same again in the same process, after ``ours`` (or after an untimed run of
  its own when ``ours`` did not run): the steady state of a long extraction, where the pinned host
  buffers and the memory under the page cache are reused, not allocated and touched for the first
  time (on a fresh virtual machine, the first touch of host memory costs as much as the writes);
- ``ours-cli``: ``python -m experiments.extract`` on the same audio (wall time, start-up included,
  and the rate the command reports while it writes);
- ``encoder``: the encoder's forward alone (padded features computed first, no hooks, nothing
  kept): what the device computes, the bound on the model side. For ``ssl`` the batches are ours
  (sorted by length, ``--batch-seconds`` of audio each) padded with their attention mask;
- ``published``: batch size 1, ``output_hidden_states=True``, every state of every layer kept in
  host memory, nothing written (the published probing code's loop);
- ``raw-write``: the bytes ours stored, written raw with ``write`` + ``fsync`` into the same
  folder: the bound on the disk side.

``--random-init`` builds the model from a config of ``--dims`` (no weights needed: throughput does
not depend on them); without it, the bundled Whisper base (``ssl`` has no bundled weights: it needs
``--random-init``; its ``--dims`` are ``base``, 12 x 768 with group-norm convolutions, and
``large``, 24 x 1024 pre-LN with layer-norm convolutions, as wav2vec2-large-lv60 and LeBenchmark's large). Rows go to a table, and to JSON in
``--json`` (default ``$OUT/extraction.json`` when ``$OUT`` is set). Usage::

    .venv/bin/python benchmarks/extraction.py --dims base --random-init                  # CPU
    python benchmarks/extraction.py --device cuda --dims large-v3 --random-init         # GPU
    python benchmarks/extraction.py ... --only ours ours-cli                            # a subset
    .venv/bin/python benchmarks/extraction.py --family ssl --dims large --random-init    # wav2vec 2.0 large, CPU
    python benchmarks/extraction.py --family ssl --dims large --random-init --device cuda

Run it with another checkout first on ``PYTHONPATH`` to measure that version of the package
(``ours`` and ``ours-cli`` import the package; the other rows do not depend on it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000
DIMS = {
    "base": {"d_model": 512, "encoder_layers": 6, "encoder_attention_heads": 8, "encoder_ffn_dim": 2048, "num_mel_bins": 80, "vocab_size": 51865},
    "large-v3": {"d_model": 1280, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120, "num_mel_bins": 128, "vocab_size": 51866},
}
SSL_DIMS = {  # Wav2Vec2Config fields of the ssl family's --dims
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "feat_extract_norm": "group"},
    "large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "feat_extract_norm": "layer",
        "do_stable_layer_norm": True,
        "conv_bias": True,
    },
}
APPROACHES = ("ours", "ours-warm", "ours-cli", "encoder", "published", "raw-write")


def synthetic_voices(folder: Path, utterances: int, seed: int = 0) -> Path:
    """``utterances`` clips of 3-15 s, two per speaker, F0 by gender (harmonics, vibrato, noise); a manifest."""
    import soundfile

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(utterances):
        speaker = index // 2
        gender = "female" if speaker % 2 else "male"
        f0 = rng.normal(210, 20) if gender == "female" else rng.normal(120, 15)
        t = np.arange(int(rng.uniform(3.0, 15.0) * SAMPLE_RATE)) / SAMPLE_RATE
        phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.03 * np.sin(2 * np.pi * rng.uniform(3, 6) * t))) / SAMPLE_RATE
        wave = sum(np.sin(k * phase) / k for k in range(1, 12)) * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(1, 3) * t) ** 2)
        wave = 0.08 * wave / np.abs(wave).max() + 0.005 * rng.standard_normal(len(t))
        path = folder / f"u{index:04d}.wav"
        soundfile.write(path, wave.astype(np.float32), SAMPLE_RATE)
        rows.append({"id": path.stem, "audio": str(path), "language": "en", "text": "a", "gender": gender, "speaker": f"s{speaker:03d}"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return manifest


def checkpoint(folder: Path, dims: str, random_init: bool, family: str = "whisper") -> Path:
    """A Whisper folder: a config of ``dims`` and its feature extractor (``--random-init``), or the
    bundled base weights; for ``ssl``, a Wav2Vec2 config of :data:`SSL_DIMS` and its feature extractor."""
    if family == "ssl":
        from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor

        folder.mkdir(parents=True, exist_ok=True)
        Wav2Vec2Config(**SSL_DIMS[dims], architectures=["Wav2Vec2Model"]).save_pretrained(folder)
        Wav2Vec2FeatureExtractor(return_attention_mask=True, do_normalize=True).save_pretrained(folder)
        return folder
    if not random_init:
        from extract.weights import bundled_whisper

        return Path(bundled_whisper("base"))
    from transformers import WhisperConfig, WhisperFeatureExtractor

    folder.mkdir(parents=True, exist_ok=True)
    heads, ffn = DIMS[dims]["encoder_attention_heads"], DIMS[dims]["encoder_ffn_dim"]
    WhisperConfig(decoder_layers=2, decoder_attention_heads=heads, decoder_ffn_dim=ffn, **DIMS[dims]).save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=DIMS[dims]["num_mel_bins"]).save_pretrained(folder)
    return folder


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_ours(model: Path, manifest: Path, store: Path, args) -> dict:
    import torch

    from extract.families import FAMILIES
    from extract.manifest import read_manifest
    from extract.runner import run_extraction
    from extract.stage_options import ExtractOptions

    extractor = FAMILIES[args.family].extractor.load(str(model), random_init=args.random_init, device=args.device, dtype=getattr(torch, args.dtype))
    sites = extractor.resolve_sites("all")
    utterances = read_manifest(manifest)
    options = ExtractOptions(batch_seconds=args.batch_seconds, utterances_per_part=args.utterances_per_part, batch_size=args.batch_size)
    stages = StageClock(extractor) if args.stages else contextlib.nullcontext()
    _sync(args.device)
    started = time.perf_counter()
    with stages:
        run_extraction(extractor, utterances, sites, store, options, config={}, show_progress=False)
    _sync(args.device)
    seconds = time.perf_counter() - started
    stored = sum(part.stat().st_size for part in store.glob("*.h5"))
    row = {"utterances": len(utterances), "seconds": seconds, "utt_per_s": len(utterances) / seconds, "sites": len(sites), "bytes": stored}
    if args.device == "cuda":
        row["gpu_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    if args.stages:
        row["stages_s"] = stages.seconds
    return row


class StageClock:
    """Seconds spent in each stage of ``run_extraction`` while it runs (``--stages``), by wrapping,
    for the run only, the calls each stage makes: ``extract`` (the model and the copy to the host, on
    the calling thread), ``submit`` (the calling thread waiting for room behind the writer thread),
    ``next_batch`` (the calling thread waiting for the loader), ``add`` (the part writer's work per
    utterance, on the writer thread) and ``close`` (the part's read-back, sync and rename). Where the
    measured checkout lacks one of these calls, that stage is left out."""

    def __init__(self, extractor):
        import extract.pipeline
        import extract.runner
        import extract.store

        self.seconds: dict[str, float] = {}
        self.targets = [(extractor, "extract", "extract"), (extract.store.PartWriter, "add", "add"), (extract.store.PartWriter, "close", "close")]
        self.targets += [(extract.pipeline.BackgroundWriter, "submit", "submit"), (extract.runner, "prefetched", "next_batch")]
        self.targets = [target for target in self.targets if hasattr(target[0], target[1])]
        self.saved: list[tuple[object, str, object]] = []

    def __enter__(self):
        for owner, name, stage in self.targets:
            self.saved.append((owner, name, vars(owner).get(name)))  # None: inherited (a method of an instance's class)
            original = getattr(owner, name)
            setattr(owner, name, self._timed_batches(original) if stage == "next_batch" else self._timed(original, stage))
        return self

    def __exit__(self, *exc):
        for owner, name, own in reversed(self.saved):
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)
        return False

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def _timed(self, call, stage: str):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self._add(stage, time.perf_counter() - started)

        return timed

    def _timed_batches(self, prefetched):
        def timed(*args, **kwargs):
            batches = prefetched(*args, **kwargs)
            while True:
                started = time.perf_counter()
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                finally:
                    self._add("next_batch", time.perf_counter() - started)
                yield batch

        return timed


def package_root() -> str:
    """The checkout whose ``extract`` this process imports (the package measured)."""
    import extract

    return str(Path(extract.__file__).resolve().parent.parent)


def run_ours_cli(model: Path, manifest: Path, store: Path, args) -> dict:
    """The command, run from the work folder with the measured checkout first on its path."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root(), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "experiments.extract", "--family", args.family, "--checkpoint", str(model), "--manifest", str(manifest)]
    command += ["--sites", "all", "--out", str(store), "--device", args.device, "--dtype", args.dtype, "--quiet"]
    command += ["--random-init", "--seed", "0"] if args.random_init else []
    command += ["--utterances-per-part", str(args.utterances_per_part), "--batch-seconds", str(args.batch_seconds)]
    command += ["--batch-size", str(args.batch_size)] if args.batch_size else []
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=store.parent, env=environment)
    seconds = time.perf_counter() - started
    if done.returncode:
        if "--batch-size" in done.stderr and args.batch_size:  # an older package: the same run without it
            args_without = argparse.Namespace(**{**vars(args), "batch_size": None})
            shutil.rmtree(store, ignore_errors=True)
            return run_ours_cli(model, manifest, store, args_without)
        raise RuntimeError(f"experiments.extract failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    utterances = len(manifest.read_text().splitlines())
    reported = re.search(r"\(([\d.]+) utt/s\)", done.stdout)
    return {
        "utterances": utterances,
        "seconds": seconds,
        "utt_per_s": utterances / seconds,
        "reported_utt_per_s": float(reported.group(1)) if reported else None,
        "bytes": sum(part.stat().st_size for part in store.glob("*.h5")),
    }


def _model(model: Path, args):
    """The encoder (random weights from the config with ``--random-init``) and its feature extractor."""
    import torch

    if args.family == "ssl":
        from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

        torch.manual_seed(0)
        encoder = Wav2Vec2Model(Wav2Vec2Config.from_pretrained(model)).to(args.device, getattr(torch, args.dtype)).eval()
        return encoder, Wav2Vec2FeatureExtractor.from_pretrained(model)
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    if args.random_init:
        torch.manual_seed(0)
        whisper = WhisperForConditionalGeneration(WhisperConfig.from_pretrained(model))
    else:
        whisper = WhisperForConditionalGeneration.from_pretrained(model)
    encoder = whisper.model.encoder.to(args.device, getattr(torch, args.dtype)).eval()
    return encoder, WhisperFeatureExtractor.from_pretrained(model)


def _audio(manifest: Path, limit: int | None = None) -> list[np.ndarray]:
    import soundfile

    rows = [json.loads(line) for line in manifest.read_text().splitlines()][:limit]
    return [soundfile.read(row["audio"], dtype="float32")[0] for row in rows]


def _ssl_batches(audio: list[np.ndarray], batch_seconds: float) -> list[list[int]]:
    """Indices sorted by length, in batches of at most ``batch_seconds`` of audio (ours' batching)."""
    batches: list[list[int]] = [[]]
    total = 0.0
    for index in sorted(range(len(audio)), key=lambda i: len(audio[i])):
        seconds = len(audio[index]) / SAMPLE_RATE
        if batches[-1] and total + seconds > batch_seconds:
            batches.append([])
            total = 0.0
        batches[-1].append(index)
        total += seconds
    return batches


def run_ssl_encoder(model: Path, manifest: Path, args) -> dict:
    """The wav2vec 2.0 forward alone on ours' batches, padded with their mask, inputs computed first."""
    import torch

    encoder, features = _model(model, args)
    audio = _audio(manifest)
    started = time.perf_counter()
    inputs = [
        features([audio[i] for i in batch], sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True) for batch in _ssl_batches(audio, args.batch_seconds)
    ]
    features_s = time.perf_counter() - started
    dtype = getattr(torch, args.dtype)
    with torch.inference_mode():
        encoder(inputs[0].input_values[:1].to(args.device, dtype))  # warm-up
        _sync(args.device)
        started = time.perf_counter()
        for batch in inputs:
            encoder(batch.input_values.to(args.device, dtype), attention_mask=batch.attention_mask.to(args.device))
        _sync(args.device)
        forward_s = time.perf_counter() - started
    return {"utterances": len(audio), "batches": len(inputs), "seconds": forward_s, "utt_per_s": len(audio) / forward_s, "features_s": features_s}


def run_encoder(model: Path, manifest: Path, args) -> dict:
    """The forward alone, features computed first (the bound on the model side)."""
    import torch

    if args.family == "ssl":
        return run_ssl_encoder(model, manifest, args)
    encoder, features = _model(model, args)
    audio = _audio(manifest)
    batch = args.batch_size or 16
    started = time.perf_counter()
    inputs = features(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    features_s = time.perf_counter() - started
    with torch.inference_mode():
        encoder(inputs[:batch].to(args.device, getattr(torch, args.dtype)))  # warm-up
        _sync(args.device)
        started = time.perf_counter()
        for start in range(0, len(inputs), batch):
            encoder(inputs[start : start + batch].to(args.device, getattr(torch, args.dtype)))
        _sync(args.device)
        forward_s = time.perf_counter() - started
    return {"utterances": len(audio), "batch": batch, "seconds": forward_s, "utt_per_s": len(audio) / forward_s, "features_s": features_s}


def run_published(model: Path, manifest: Path, args) -> dict:
    """Batch size 1, ``output_hidden_states``, every state kept on the host, no inference mode."""
    import torch

    encoder, features = _model(model, args)
    audio = _audio(manifest, args.published_utterances)
    kept = []
    started = time.perf_counter()
    with torch.no_grad():
        for samples in audio:
            inputs = features(samples, sampling_rate=SAMPLE_RATE, return_tensors="pt")
            inputs = inputs.input_values if args.family == "ssl" else inputs.input_features
            output = encoder(inputs.to(args.device, getattr(torch, args.dtype)), output_hidden_states=True)
            kept.append([state.float().cpu().numpy() for state in output.hidden_states])
    seconds = time.perf_counter() - started
    return {"utterances": len(audio), "seconds": seconds, "utt_per_s": len(audio) / seconds, "kept_gib": sum(a.nbytes for item in kept for a in item) / 2**30}


def run_raw_write(folder: Path, total_bytes: int, utterances: int) -> dict:
    """``total_bytes`` (what ours stored) written raw in 64 MiB blocks, then fsync, in ``folder``."""
    block = np.random.default_rng(0).integers(0, 255, 64 << 20, dtype=np.uint8).tobytes()
    path = folder / "raw-write.bin"
    started = time.perf_counter()
    with open(path, "wb") as handle:
        left = total_bytes
        while left > 0:
            handle.write(block[: min(left, len(block))])
            left -= len(block)
        handle.flush()
        os.fsync(handle.fileno())
    seconds = time.perf_counter() - started
    path.unlink()
    return {"bytes": total_bytes, "seconds": seconds, "mib_per_s": total_bytes / 2**20 / seconds, "utt_per_s": utterances / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--family", default="whisper", choices=["whisper", "ssl"], help="the encoder measured (ssl: wav2vec 2.0, with --random-init)")
    parser.add_argument("--dims", default="base", choices=sorted(set(DIMS) | set(SSL_DIMS)), help="the encoder's dimensions with --random-init")
    parser.add_argument("--random-init", action="store_true", help="random weights from a config of --dims (without it: the bundled Whisper base)")
    parser.add_argument("--dtype", help="compute dtype (default: bfloat16 on cuda, float32 on cpu)")
    parser.add_argument("--utterances", type=int, default=None, help="clips of 3-15 s (default: 160 on cuda, 24 on cpu)")
    parser.add_argument("--published-utterances", type=int, default=None, help="clips for the published approach (default: min(48, --utterances))")
    parser.add_argument("--batch-seconds", type=float, default=120.0)
    parser.add_argument("--batch-size", type=int, help="utterances per batch for ours (default: the package's) and the encoder bound (default 16)")
    parser.add_argument("--utterances-per-part", type=int, default=256, help="clips per part file for ours (the package's default: 256)")
    parser.add_argument("--only", nargs="+", choices=APPROACHES, default=list(APPROACHES))
    parser.add_argument("--work", type=Path, default=None, help="folder for audio and stores (default: a new temporary folder; the disk measured)")
    parser.add_argument("--json", type=Path, default=Path(os.environ["OUT"]) / "extraction.json" if os.environ.get("OUT") else None)
    parser.add_argument("--tag", default="", help="a name for this run in the JSON (e.g. the commit)")
    parser.add_argument("--stages", action="store_true", help="also time the stages of ours (the model, the waits, the writer's calls)")
    args = parser.parse_args()
    if args.family == "ssl" and not args.random_init:
        parser.error("--family ssl has no bundled weights: give --random-init (throughput does not depend on the weights)")
    if args.dims not in (SSL_DIMS if args.family == "ssl" else DIMS):
        parser.error(f"--dims {args.dims} is not a size of {args.family}: {', '.join(sorted(SSL_DIMS if args.family == 'ssl' else DIMS))}")
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.utterances = args.utterances or (160 if args.device == "cuda" else 24)
    args.published_utterances = args.published_utterances or min(48, args.utterances)
    work = Path(tempfile.mkdtemp(dir=args.work, prefix="bench-extraction-"))
    manifest = synthetic_voices(work / "audio", args.utterances)
    model = checkpoint(work / f"{args.family}-{args.dims}", args.dims, args.random_init, args.family)
    import torch

    machine = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "cores": len(os.sched_getaffinity(0)), "torch": torch.__version__}
    machine |= {"package": package_root(), "family": args.family, "dims": args.dims if args.random_init else "base (bundled weights)", "dtype": args.dtype}
    machine |= {"tag": args.tag, "date": time.strftime("%Y-%m-%d"), "utterances_per_part": args.utterances_per_part}
    print(json.dumps(machine), flush=True)
    rows, stored, done = [], None, set()
    for approach in args.only:
        store = work / f"store-{approach}"
        if approach == "ours" or (approach == "ours-warm" and "ours" in done):
            row = run_ours(model, manifest, store, args)
        elif approach == "ours-warm":
            run_ours(model, manifest, work / "store-warm-up", args)
            shutil.rmtree(work / "store-warm-up")
            row = run_ours(model, manifest, store, args)
        elif approach == "ours-cli":
            row = run_ours_cli(model, manifest, store, args)
        elif approach == "encoder":
            row = run_encoder(model, manifest, args)
        elif approach == "published":
            row = run_published(model, manifest, args)
        else:
            row = run_raw_write(work, stored or 0, args.utterances)
        stored = stored or row.get("bytes")
        shutil.rmtree(store, ignore_errors=True)
        rows.append({"approach": approach, **row})
        done.add(approach)
        print(json.dumps(rows[-1]), flush=True)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    print(f"\n{machine['device']}, {machine['dims']}, {args.dtype}, {args.utterances} clips of 3-15 s, every site, parts of {args.utterances_per_part}\n")
    print("| approach | utt/s | seconds | GiB written |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['approach']} | {row['utt_per_s']:.2f} | {row['seconds']:.1f} | {row.get('bytes', 0) / 2**30:.2f} |")
    for row in rows:
        if row.get("stages_s"):
            print(f"\n{row['approach']}'s stages (seconds): " + ", ".join(f"{name} {value:.2f}" for name, value in row["stages_s"].items()))
    rates = {row["approach"]: row["utt_per_s"] for row in rows}
    bounds = [rates[name] for name in ("encoder", "raw-write") if name in rates]
    for ours in ("ours", "ours-warm"):
        if ours in rates and bounds:
            print(f"\n{ours} / min(encoder, raw-write) = {rates[ours] / min(bounds):.2f}", end="")
        if ours in rates and "published" in rates:
            print(f"; {ours} / published = {rates[ours] / rates['published']:.2f}", end="")
    print()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        previous = json.loads(args.json.read_text()) if args.json.exists() else []
        args.json.write_text(json.dumps(previous + [{"machine": machine, "rows": rows}], indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
