"""Writes CTranslate2 WhisperSpec files from a transformers Whisper model: the inverse of the converter,
so tests can check the converter on tiny random models without the ctranslate2 package."""

from __future__ import annotations

import struct

import numpy as np


def _string(text: str) -> bytes:
    data = text.encode() + b"\0"
    return struct.pack("<H", len(data)) + data


def _variable(name: str, array: np.ndarray, dtype_code: int) -> bytes:
    array = np.ascontiguousarray(array)
    head = _string(name) + struct.pack("<B", array.ndim) + struct.pack("<" + "I" * array.ndim, *array.shape)
    raw = array.tobytes()
    return head + struct.pack("<BI", dtype_code, len(raw)) + raw


def whisper_to_ct2_variables(model) -> dict[str, np.ndarray]:
    state = {key: value.detach().numpy() for key, value in model.state_dict().items()}
    out: dict[str, np.ndarray] = {}

    def put_norm(target, source):
        out[f"{target}/gamma"] = state[f"{source}.weight"]
        out[f"{target}/beta"] = state[f"{source}.bias"]

    def put_linear(target, source):
        out[f"{target}/weight"] = state[f"{source}.weight"]
        out[f"{target}/bias"] = state[f"{source}.bias"]

    def put_self_attention(target, source):
        put_norm(f"{target}/layer_norm", f"{source}_layer_norm")
        q, k, v = (state[f"{source}.{p}_proj.weight"] for p in "qkv")
        out[f"{target}/linear_0/weight"] = np.concatenate([q, k, v])
        out[f"{target}/linear_0/bias"] = np.concatenate(
            [state[f"{source}.q_proj.bias"], np.zeros_like(state[f"{source}.q_proj.bias"]), state[f"{source}.v_proj.bias"]]
        )
        put_linear(f"{target}/linear_1", f"{source}.out_proj")

    def put_ffn(target, source):
        put_norm(f"{target}/layer_norm", f"{source}.final_layer_norm")
        put_linear(f"{target}/linear_0", f"{source}.fc1")
        put_linear(f"{target}/linear_1", f"{source}.fc2")

    config = model.config
    enc, dec = "model.encoder", "model.decoder"
    put_linear("encoder/conv1", f"{enc}.conv1")
    put_linear("encoder/conv2", f"{enc}.conv2")
    out["encoder/position_encodings/encodings"] = state[f"{enc}.embed_positions.weight"]
    out["encoder/num_heads"] = np.array(config.encoder_attention_heads, dtype=np.int16)
    for i in range(config.encoder_layers):
        put_self_attention(f"encoder/layer_{i}/self_attention", f"{enc}.layers.{i}.self_attn")
        put_ffn(f"encoder/layer_{i}/ffn", f"{enc}.layers.{i}")
    put_norm("encoder/layer_norm", f"{enc}.layer_norm")
    out["decoder/embeddings/weight"] = state[f"{dec}.embed_tokens.weight"]
    out["decoder/position_encodings/encodings"] = state[f"{dec}.embed_positions.weight"]
    out["decoder/num_heads"] = np.array(config.decoder_attention_heads, dtype=np.int16)
    for i in range(config.decoder_layers):
        source = f"{dec}.layers.{i}"
        put_self_attention(f"decoder/layer_{i}/self_attention", f"{source}.self_attn")
        put_norm(f"decoder/layer_{i}/attention/layer_norm", f"{source}.encoder_attn_layer_norm")
        put_linear(f"decoder/layer_{i}/attention/linear_0", f"{source}.encoder_attn.q_proj")
        k, v = state[f"{source}.encoder_attn.k_proj.weight"], state[f"{source}.encoder_attn.v_proj.weight"]
        out[f"decoder/layer_{i}/attention/linear_1/weight"] = np.concatenate([k, v])
        vb = state[f"{source}.encoder_attn.v_proj.bias"]
        out[f"decoder/layer_{i}/attention/linear_1/bias"] = np.concatenate([np.zeros_like(vb), vb])
        put_linear(f"decoder/layer_{i}/attention/linear_2", f"{source}.encoder_attn.out_proj")
        put_ffn(f"decoder/layer_{i}/ffn", source)
    put_norm("decoder/layer_norm", f"{dec}.layer_norm")
    return out


def write_ct2(variables: dict[str, np.ndarray], aliases: dict[str, str], spec: str = "WhisperSpec", float_code: int = 4) -> bytes:
    """Serialize; floats are stored with ``float_code`` (4 = float16, 0 = float32), as CTranslate2 does."""
    codes = {np.dtype("float32"): float_code, np.dtype("int16"): 2, np.dtype("int8"): 1, np.dtype("int32"): 3}
    body = struct.pack("<I", 6) + _string(spec) + struct.pack("<I", 3) + struct.pack("<I", len(variables))
    for name in sorted(variables):
        array = variables[name]
        code = codes[array.dtype]
        if code == 4:
            array = array.astype("<f2")
        body += _variable(name, array, code)
    body += struct.pack("<I", len(aliases))
    for alias, target in aliases.items():
        body += _string(alias) + _string(target)
    return body
