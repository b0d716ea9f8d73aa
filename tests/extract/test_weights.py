import json
import struct

import numpy as np
import pytest
import torch

from extract.ct2 import CT2FormatError, parse_ct2
from extract.families.tiny import tiny_encoder_decoder
from extract.weights import BUNDLED, convert_ct2_directory
from tests.ct2_writer import whisper_to_ct2_variables, write_ct2


def test_parse_header_scalars_aliases_and_dtypes():
    variables = {
        "a/weight": np.arange(6, dtype=np.float32).reshape(2, 3),
        "a/num_heads": np.array(8, dtype=np.int16),
    }
    blob = write_ct2(variables, {"b/weight": "a/weight"}, spec="TestSpec", float_code=0)
    model = parse_ct2(blob)
    assert (model.version, model.spec, model.revision) == (6, "TestSpec", 3)
    np.testing.assert_array_equal(model["b/weight"], variables["a/weight"])
    assert model.scalar("a/num_heads") == 8 and model["a/weight"].dtype == np.float32


def test_bfloat16_is_decoded():
    values = np.array([1.5, -2.0, 0.15625], dtype=np.float32)
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    name = b"x\0"
    blob = struct.pack("<I", 6) + struct.pack("<H", 5) + b"Spec\0" + struct.pack("<II", 1, 1)
    blob += struct.pack("<H", len(name)) + name + struct.pack("<BI", 1, 3) + struct.pack("<BI", 5, len(raw)) + raw
    blob += struct.pack("<I", 0)
    np.testing.assert_array_equal(parse_ct2(blob)["x"], values)


def test_truncated_and_trailing_bytes_are_errors():
    blob = write_ct2({"w": np.ones(4, dtype=np.float32)}, {})
    with pytest.raises(CT2FormatError, match="truncated"):
        parse_ct2(blob[:-10], source="cut.bin")
    with pytest.raises(CT2FormatError, match="2 trailing bytes"):
        parse_ct2(blob + b"\0\0")


def _tiny_whisper():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(**tiny_encoder_decoder(vocab_size=51865, decoder_layers=2, max_source_positions=1500, max_target_positions=448, num_mel_bins=80))
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # non-trivial norms and biases so a swapped mapping cannot pass
        for name, parameter in model.named_parameters():
            if "k_proj" not in name:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def test_converter_round_trips_a_tiny_whisper(tmp_path):
    import importlib.resources

    from transformers import WhisperForConditionalGeneration

    original = _tiny_whisper()
    ct2_dir = tmp_path / "ct2"
    ct2_dir.mkdir()
    (ct2_dir / "model.bin").write_bytes(write_ct2(whisper_to_ct2_variables(original), {"decoder/projection/weight": "decoder/embeddings/weight"}, float_code=0))
    assets = importlib.resources.files(BUNDLED["base"].assets_package) / BUNDLED["base"].assets_dir
    (ct2_dir / "tokenizer.json").write_bytes(assets.joinpath("tokenizer.json").read_bytes())
    (ct2_dir / "config.json").write_bytes(assets.joinpath("config.json").read_bytes())
    folder = convert_ct2_directory(ct2_dir, tmp_path / "hf")
    converted = WhisperForConditionalGeneration.from_pretrained(folder).eval()
    assert converted.config.encoder_attention_heads == 2 and converted.config.encoder_layers == 2
    features = torch.randn(1, 80, 3000)
    decoder_ids = torch.tensor([[50258, 50259, 50359, 50363, 400]])
    with torch.inference_mode():
        expected = original(input_features=features, decoder_input_ids=decoder_ids).logits
        actual = converted(input_features=features, decoder_input_ids=decoder_ids).logits
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["lang_to_id"]["<|en|>"] == 50259 and generation["task_to_id"]["transcribe"] == 50359
    assert generation["no_timestamps_token_id"] == 50363 and generation["is_multilingual"] is True


def test_quantized_weights_are_refused(tmp_path):
    from extract.weights import whisper_state_dict

    model = parse_ct2(write_ct2({"encoder/conv1/weight_scale": np.ones(2, dtype=np.float32)}, {}))
    with pytest.raises(ValueError, match="int8-quantized"):
        whisper_state_dict(model)


def _toy_tokenizer(merges, extra_vocab):
    """A byte-level BPE tokenizer.json: the 256 byte tokens (as GPT-2 maps them: space is Ġ) and merged tokens from id 256."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    others = [b for b in range(256) if b not in printable]
    symbols = {byte: chr(byte) for byte in printable} | {byte: chr(256 + rank) for rank, byte in enumerate(others)}
    return {"model": {"vocab": {symbols[byte]: byte for byte in range(256)} | extra_vocab, "merges": merges}}


@pytest.mark.parametrize("as_strings", [True, False])
def test_a_lost_first_merge_is_restored_at_its_rank(as_strings):
    from extract.weights import restore_missing_merges

    kept = [["h", "e"], ["Ġt", "he"]]
    tokenizer = _toy_tokenizer([" ".join(m) for m in kept] if as_strings else kept, {"Ġt": 256, "he": 257, "Ġthe": 258, "<|endoftext|>": 259})
    tokenizer["added_tokens"] = [{"id": 259, "content": "<|endoftext|>", "special": True}]
    assert restore_missing_merges(tokenizer) == [("Ġ", "t")]
    expected = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]
    assert tokenizer["model"]["merges"] == ([" ".join(m) for m in expected] if as_strings else expected)
    assert restore_missing_merges(tokenizer) == []


def test_a_lost_merge_with_two_possible_splits_is_refused():
    from extract.weights import restore_missing_merges

    tokenizer = _toy_tokenizer([["a", "b"], ["b", "c"]], {"ab": 256, "bc": 257, "abc": 258})
    with pytest.raises(ValueError, match=r"no merge makes 'abc' \(id 258\) and it has 2 possible splits"):
        restore_missing_merges(tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["base", "tiny.en"])
def test_the_bundled_tokenizers_merge_space_t(size):
    from transformers import WhisperTokenizerFast

    from extract.weights import bundled_whisper

    tokenizer = WhisperTokenizerFast.from_pretrained(bundled_whisper(size))
    assert tokenizer.tokenize(" two trains") == ["Ġtwo", "Ġtrains"]
    assert tokenizer.decode(tokenizer.encode(" two trains", add_special_tokens=False)) == " two trains"
