"""Generation on tiny random models: the language forcing of each family reaches the decoder, and the
transcription loop writes, resumes and refuses mixed settings. Real decoding quality is checked on
the bundled Whisper in test_real_whisper.py."""

import json

import numpy as np
import pytest
import torch
from transformers import GenerationConfig

from extract.families import tiny_extractor
from extract.families.generation import GenerationError, GenerationOptions
from extract.families.s2t import S2TGenerator
from extract.families.seamless import SeamlessGenerator
from extract.families.whisper import WhisperGenerator
from extract.families.zeroswot import ZeroSwotGenerator
from extract.manifest import Utterance
from extract.runner import SettingsMismatchError, check_settings, finished_ids, run_transcription


class IdTokenizer:
    """Stand-in tokenizer: decodes ids as ``t<id>`` words and keeps the raw ids it was given."""

    unk_token_id = 3

    def __init__(self, lang_code_to_id=None):
        self.lang_code_to_id = lang_code_to_id or {}
        self.decoded: list[list[int]] = []

    def batch_decode(self, tokens, skip_special_tokens=True):
        rows = tokens.tolist()
        self.decoded.extend(rows)
        return [" ".join(f"t{i}" for i in row) for row in rows]

    def convert_tokens_to_ids(self, token):
        return self.lang_code_to_id.get(token, self.unk_token_id)


def audios(seconds=(1.0, 1.6)):
    rng = np.random.default_rng(0)
    return [rng.normal(0, 0.1, int(s * 16_000)).astype(np.float32) for s in seconds]


def test_s2t_forces_the_target_language_token():
    tokenizer = IdTokenizer({"es": 42, "it": 43})
    generator = S2TGenerator(tiny_extractor("s2t"), tokenizer, max_new_tokens=4)
    texts = generator.generate(audios(), "en", "st", "it")
    assert len(texts) == 2
    assert all(row[1] == 43 for row in tokenizer.decoded)  # decoder start, then the forced language
    with pytest.raises(GenerationError, match="no language token for 'fr'"):
        generator.generate(audios(), "en", "st", "fr")


def test_s2t_without_language_codes_generates_unforced():
    generator = S2TGenerator(tiny_extractor("s2t"), IdTokenizer(), max_new_tokens=3)
    assert generator.forced_bos("es") == {}
    assert len(generator.generate(audios(), "en", "asr")) == 2


def test_seamless_passes_its_three_letter_target_code():
    extractor = tiny_extractor("seamless")
    extractor.model.generation_config.text_decoder_lang_to_code_id = {"spa": 50, "eng": 51}
    tokenizer = IdTokenizer()
    generator = SeamlessGenerator(extractor, tokenizer, max_new_tokens=4)
    generator.generate(audios(), "en", "st", "es")
    assert all(row[1] == 50 for row in tokenizer.decoded)
    tokenizer.decoded.clear()
    generator.generate(audios(), "en", "asr")  # ASR: the target is the source language
    assert all(row[1] == 51 for row in tokenizer.decoded)


def _multilingual_tiny_whisper():
    extractor = tiny_extractor("whisper")
    extractor.model.generation_config = GenerationConfig(
        decoder_start_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        is_multilingual=True,
        max_length=64,
        lang_to_id={"<|en|>": 10, "<|es|>": 11},
        task_to_id={"transcribe": 12, "translate": 13},
        no_timestamps_token_id=14,
    )
    return extractor


def _spy_on_generate(model):
    """Record the keyword arguments of each ``generate`` call and still run the real one (HF Whisper
    returns only the new tokens, so the forced prompt is checked in the call)."""
    calls, real = [], model.generate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    model.generate = spy
    return calls


@pytest.mark.parametrize("task, tgt_lang, expected", [("asr", None, ("es", "transcribe")), ("st", "en", ("es", "translate"))])
def test_whisper_forces_language_and_task(task, tgt_lang, expected):
    extractor = _multilingual_tiny_whisper()
    calls = _spy_on_generate(extractor.model)
    texts = WhisperGenerator(extractor, IdTokenizer(), max_new_tokens=3).generate(audios(), "es", task, tgt_lang)
    assert len(texts) == 2
    assert [(call["language"], call["task"]) for call in calls] == [expected]


def test_whisper_refuses_non_english_translation_unless_forcing_is_asked_for():
    with pytest.raises(GenerationError, match="only into English"):
        WhisperGenerator(_multilingual_tiny_whisper(), IdTokenizer()).generate(audios(), "en", "st", "es")
    extractor = _multilingual_tiny_whisper()
    calls = _spy_on_generate(extractor.model)
    generator = WhisperGenerator(extractor, IdTokenizer(), max_new_tokens=3, translate_by_forcing=True)
    generator.generate(audios(), "en", "st", "es")
    assert [(call["language"], call["task"]) for call in calls] == [("es", "transcribe")]  # target forced, transcribe task
    assert generator.settings()["translate_by_forcing"] is True


def _tiny_nllb():
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    torch.manual_seed(0)
    return M2M100ForConditionalGeneration(
        M2M100Config(
            vocab_size=64,
            d_model=24,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=64,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
        )
    )


def test_zeroswot_feeds_compressed_embeddings_to_the_decoder_with_the_flores_code():
    tokenizer = IdTokenizer({"spa_Latn": 60})
    generator = ZeroSwotGenerator(tiny_extractor("zeroswot"), tokenizer, _tiny_nllb(), max_new_tokens=4)
    generator.generate(audios(), "en", "st", "es")
    assert all(row[:2] == [2, 60] for row in tokenizer.decoded)
    with pytest.raises(GenerationError, match="no language token 'fra_Latn'"):
        generator.generate(audios(), "en", "st", "fr")


def test_zeroswot_decodes_with_five_beams_unless_told_otherwise():
    """5 beams: the model card's example, the authors' fairseq evaluation (--beam 5) and Fucci et al.'s code."""
    decoder = _tiny_nllb()
    calls = _spy_on_generate(decoder)
    generator = ZeroSwotGenerator(tiny_extractor("zeroswot"), IdTokenizer({"ita_Latn": 61}), decoder, "johntsi/nllb-x", max_new_tokens=3)
    generator.generate(audios(), "en", "st", "it")
    assert calls[-1]["num_beams"] == 5 and calls[-1]["forced_bos_token_id"] == 61
    assert generator.settings()["overrides"] == {"num_beams": 5, "max_new_tokens": 3}
    assert generator.settings()["decoder"] == "johntsi/nllb-x"
    ZeroSwotGenerator(tiny_extractor("zeroswot"), IdTokenizer({"ita_Latn": 61}), decoder, num_beams=2, max_new_tokens=3).generate(audios(), "en", "st", "it")
    assert calls[-1]["num_beams"] == 2
    assert "num_beams" not in S2TGenerator(tiny_extractor("s2t"), IdTokenizer()).overrides  # other families keep their own config


def test_the_zeroswot_decoder_is_the_one_its_config_names():
    from transformers import PretrainedConfig

    from extract.families.zeroswot import zeroswot_decoder

    extractor = tiny_extractor("zeroswot")
    with pytest.raises(GenerationError, match="names no NLLB model.*--decoder"):
        zeroswot_decoder(extractor, None)
    extractor.model.config = PretrainedConfig(nllb_model_name_or_path="johntsi/nllb-200-distilled-1.3B_mustc_en-to-8")
    assert zeroswot_decoder(extractor, None) == "johntsi/nllb-200-distilled-1.3B_mustc_en-to-8"
    assert zeroswot_decoder(extractor, "facebook/nllb-200-distilled-600M") == "facebook/nllb-200-distilled-600M"


def test_a_translation_without_target_is_refused():
    with pytest.raises(GenerationError, match="needs a target"):
        S2TGenerator(tiny_extractor("s2t"), IdTokenizer()).generate(audios(), "en", "st", None)


def _utterances(tone, count=5, translation=None):
    return [
        Utterance(
            id=f"u{i}",
            audio=str(tone(f"u{i}.wav", seconds=0.5 + 0.2 * i)),
            language="en",
            text=f"text {i}",
            gender="female" if i % 2 else "male",
            speaker=f"s{i % 3}",
            translation=translation,
        )
        for i in range(count)
    ]


def test_transcribe_writes_rows_and_a_rerun_skips_finished_ids(tmp_path, tone):
    utterances = _utterances(tone, translation="texto")
    utterances.append(Utterance(id="bad", audio=str(tmp_path / "missing.wav"), language="en", text="x", gender="male", speaker="s9"))
    generator = S2TGenerator(tiny_extractor("s2t"), IdTokenizer({"es": 42}), max_new_tokens=3)
    out = tmp_path / "hyps.jsonl"
    written, skipped, _ = run_transcription(generator, utterances, out, "st", "es", "tiny", batch_seconds=1.5, max_seconds=60, show_progress=False)
    assert written == 5 and [s["id"] for s in skipped] == ["bad"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == [f"u{i}" for i in range(5)]
    first = next(r for r in rows if r["id"] == "u1")
    assert first == {
        "id": "u1",
        "reference": "texto",
        "hypothesis": first["hypothesis"],
        "gender": "female",
        "speaker": "s1",
        "language": "en",
        "model": "tiny",
        "task": "st",
        "tgt_lang": "es",
        "dataset": "",
        "source": "text 1",
    }
    assert finished_ids(out) == {f"u{i}" for i in range(5)}


def test_an_interrupted_last_line_is_removed_and_redone(tmp_path):
    out = tmp_path / "hyps.jsonl"
    out.write_text('{"id": "a", "hypothesis": "x"}\n{"id": "b", "hypo')
    assert finished_ids(out) == {"a"}
    assert out.read_text() == '{"id": "a", "hypothesis": "x"}\n'


def test_settings_must_match_to_resume(tmp_path):
    out = tmp_path / "h.jsonl"
    path = tmp_path / "h.jsonl.settings.json"
    check_settings(path, {"model": "m", "decoding": {"num_beams": 5}, "provenance": {"commit": "a"}}, out)
    out.write_text('{"id": "a", "hypothesis": "x"}\n')
    check_settings(path, {"model": "m", "decoding": {"num_beams": 5}, "provenance": {"commit": "b"}}, out)  # code version may differ
    with pytest.raises(SettingsMismatchError, match=r"other settings than this run \(decoding.num_beams: 5 vs 1\)"):
        check_settings(path, {"model": "m", "decoding": {"num_beams": 1}, "provenance": {"commit": "a"}}, out)


def test_english_only_whisper_takes_no_language_token_and_refuses_other_languages():
    extractor = _multilingual_tiny_whisper()
    extractor.model.generation_config.is_multilingual = False
    calls = _spy_on_generate(extractor.model)
    generator = WhisperGenerator(extractor, IdTokenizer(), max_new_tokens=3)
    assert len(generator.generate(audios(), "en", "asr")) == 2
    assert "language" not in calls[0] and "task" not in calls[0]
    with pytest.raises(GenerationError, match="English-only"):
        generator.generate(audios(), "es", "asr")
    with pytest.raises(GenerationError, match="cannot translate"):
        generator.generate(audios(), "en", "st", "en")


def test_language_codes_map_and_pass_through():
    from extract.families.generation import LanguageCodeError
    from extract.families.seamless import seamless_code
    from extract.families.zeroswot import nllb_code

    assert (seamless_code("it"), seamless_code("spa"), nllb_code("sr"), nllb_code("fra_Latn")) == ("ita", "spa", "srp_Cyrl", "fra_Latn")
    with pytest.raises(LanguageCodeError, match="3-letter"):
        seamless_code("xx")


def _no_hub(*args, **kwargs):
    raise OSError("We couldn't connect to 'https://huggingface.co' (the test forbids the hub)")


def test_the_tiny_random_whisper_transcribes_offline_with_the_bundled_tokenizer(monkeypatch, tmp_path):
    """``tiny-random`` is offline for every stage: its tokenizer is the bundled tiny.en one (no hub),
    it forces any language, and the encoder (so every stored state) is the extractor's, unchanged."""
    import transformers

    from extract.families.base import tiny_checkpoint
    from extract.spec import ModelSpec, load_generator

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", _no_hub)
    generator = load_generator(ModelSpec("whisper", "tiny-random", device="cpu"))
    assert generator.extractor.checkpoint == tiny_checkpoint("whisper") and WhisperGenerator.tiny_transcribes
    for language in ("en", "it", "ar"):
        texts = generator.generate(audios((0.5,)), language, "asr")
        assert len(texts) == 1 and isinstance(texts[0], str)
    fresh = tiny_extractor("whisper").model.model.encoder.state_dict()
    assert all(torch.equal(value, generator.model.model.encoder.state_dict()[name]) for name, value in fresh.items())
    assert load_generator(ModelSpec("whisper", "tiny-random", device="cpu")).generate(audios((0.5,)), "it", "asr") == generator.generate(
        audios((0.5,)), "it", "asr"
    )


@pytest.mark.parametrize("family", ["seamless", "s2t", "zeroswot"])
def test_a_tiny_random_model_without_an_offline_tokenizer_refuses_to_transcribe_in_one_line(family, monkeypatch):
    import transformers

    from extract.families import FAMILIES
    from extract.spec import ModelSpec, load_generator

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", _no_hub)
    assert not FAMILIES[family].generator.tiny_can_transcribe(GenerationOptions())
    with pytest.raises(GenerationError, match=f"the tiny random {family} model .* cannot transcribe: give it transcribe: false") as refused:
        load_generator(ModelSpec(family, "tiny-random", device="cpu"))
    assert "\n" not in str(refused.value)
