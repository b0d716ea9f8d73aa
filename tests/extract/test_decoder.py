"""The decoder's states while it generates (extract.decoder): the teacher-forced states are the ones
the decoder had during generation, token by token; rows are the generated tokens, prompt and forced
tokens left out; surface strings join to the hypothesis."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from extract.decoder import (
    DecoderError,
    decoder_site_table,
    decoder_states,
    generate_with_prompt,
    resolve_decoder_sites,
    teacher_forced_states,
    token_pieces,
    token_surface,
)
from extract.families import UnknownSiteError, tiny_extractor
from extract.families.generation import GenerationError, quiet_transformers
from extract.families.s2t import S2TGenerator
from extract.families.seamless import SeamlessGenerator
from extract.families.whisper import WhisperGenerator
from tests.tiny_whisper import IdWords


class DecodingIdWords(IdWords):
    """:class:`IdWords` that also decodes one sequence (what token pieces are found from)."""

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(f"t{i}" for i in ids)


class LanguageIds(DecodingIdWords):
    """An S2T tokenizer stand-in with language codes: its generator forces the target's token as BOS."""

    lang_code_to_id = {"es": 7, "fr": 8}


def _audios(seconds=(1.0, 0.6), seed=0):
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(s * 16000))).astype(np.float32) for s in seconds]


def _whisper(num_beams=None, max_new_tokens=6):
    extractor = tiny_extractor("whisper")
    tokenizer = WhisperGenerator.tiny_tokenizer(extractor)
    return WhisperGenerator(extractor, tokenizer, num_beams=num_beams, max_new_tokens=max_new_tokens)


def _seamless():
    extractor = tiny_extractor("seamless")
    extractor.model.generation_config.text_decoder_lang_to_code_id = {"spa": 50, "eng": 51}
    return SeamlessGenerator(extractor, DecodingIdWords(), max_new_tokens=5)


def _s2t():
    return S2TGenerator(tiny_extractor("s2t"), LanguageIds(), max_new_tokens=5)


FAMILIES = {"whisper": (_whisper, "asr", None), "seamless": (_seamless, "st", "es"), "s2t": (_s2t, "st", "es")}


def _states_during_generation(generator, audios, sites, language, task, target):
    """Each decoder site's state at the last position of every decoder call of a greedy generation
    (with its key-value cache): call k's is the state that generated token k."""
    extractor = generator.extractor
    table = decoder_site_table(extractor)
    steps = {site: [] for site in sites}
    handles = [
        extractor.model.get_submodule(table[site].module).register_forward_hook(
            lambda module, args, output, site=site: steps[site].append((output[0] if isinstance(output, tuple) else output)[:, -1].clone())
        )
        for site in sites
    ]
    try:
        inputs = extractor.on_device(extractor.prepare(audios).inputs)
        with torch.inference_mode(), quiet_transformers():
            generator._generate(inputs, language, task, target)
    finally:
        for handle in handles:
            handle.remove()
    return {site: torch.stack(values, dim=1).numpy() for site, values in steps.items()}  # [B, steps, D]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_teacher_forced_states_are_the_states_the_decoder_had_while_generating(family):
    make, task, tgt_lang = FAMILIES[family]
    generator = make()
    audios = _audios()
    sites = list(decoder_site_table(generator.extractor))
    decoded = decoder_states(generator, audios, sites, "en", task, tgt_lang)
    target = tgt_lang or "en"
    during = _states_during_generation(generator, audios, sites, "en", task, target)
    forced = generator.forced_tokens(target)
    for index, utterance in enumerate(decoded):
        assert len(utterance.tokens) > 0
        for site in sites:
            assert utterance.states[site].shape == (len(utterance.tokens), generator.extractor.model.config.d_model if family != "seamless" else 16)
            expected = during[site][index, forced : forced + len(utterance.tokens)]
            np.testing.assert_allclose(utterance.states[site], expected, atol=1e-5, rtol=1e-4, err_msg=f"{family} {site}")


def test_rows_are_the_generated_tokens_without_the_prompt_and_the_hypothesis_is_the_transcript():
    generator = _whisper()
    audios = _audios()
    decoded = decoder_states(generator, audios, ["decoder.layer.0"], "en", "asr", None)
    plain = generator.generate(audios, "en", "asr")
    inputs = generator.extractor.on_device(generator.extractor.prepare(audios).inputs)
    generated = generate_with_prompt(generator, inputs, "en", "asr", "en")
    prompt = generator.tokenizer.convert_ids_to_tokens(generated.prompt[0].tolist())
    assert prompt == ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    for utterance, hypothesis, tokens in zip(decoded, plain, generated.tokens):
        assert list(utterance.tokens.ids) == tokens
        assert utterance.tokens.hypothesis.strip() == hypothesis
        assert len(utterance.tokens.pieces) == len(utterance.tokens.ids)


def test_s2t_s_forced_language_token_is_not_a_row():
    generator = _s2t()
    decoded = decoder_states(generator, _audios((0.8,)), ["decoder.final"], "en", "st", "es")
    inputs = generator.extractor.on_device(generator.extractor.prepare(_audios((0.8,))).inputs)
    with torch.inference_mode():
        sequence = generator._generate(inputs, "en", "st", "es")[0].tolist()
    assert sequence[1] == 7  # start token, then the forced language token
    assert list(decoded[0].tokens.ids) == sequence[2:]


def test_a_generation_left_with_only_its_forced_token_is_refused():
    generator = S2TGenerator(tiny_extractor("s2t"), LanguageIds(), max_new_tokens=1)
    with pytest.raises(GenerationError, match="s2t: a generation ended with the 1 token.s. it forces and none generated; raise --max-new-tokens"):
        decoder_states(generator, _audios((0.8,)), ["decoder.final"], "en", "st", "es")


def test_beam_search_states_are_teacher_forced_on_the_chosen_hypothesis():
    generator = _whisper(num_beams=3)
    audios = _audios()
    decoded = decoder_states(generator, audios, ["decoder.layer.0", "decoder.final"], "en", "asr", None)
    plain = generator.generate(audios, "en", "asr")
    for utterance, hypothesis in zip(decoded, plain):
        assert utterance.tokens.hypothesis.strip() == hypothesis
        assert utterance.states["decoder.final"].shape[0] == len(utterance.tokens)


def test_the_end_of_sequence_token_is_the_last_row_and_padding_after_it_is_not():
    generator = _whisper(max_new_tokens=3)
    end = generator.generation_config.eos_token_id
    model = generator.extractor.model
    bias = torch.zeros(model.proj_out.out_features)
    bias[end] = 1e4  # the end of sequence wins at the first step
    model.proj_out.register_forward_hook(lambda module, args, output: output + bias)
    decoded = decoder_states(generator, _audios(), ["decoder.final"], "en", "asr", None)
    for utterance in decoded:
        assert utterance.tokens.ids == (end,) and utterance.tokens.pieces == ("",)
        assert utterance.states["decoder.final"].shape[0] == 1


def test_sites_resolve_in_forward_order_and_an_unknown_one_is_refused():
    extractor = tiny_extractor("whisper")
    assert list(decoder_site_table(extractor)) == ["decoder.layer.0", "decoder.final"]
    assert resolve_decoder_sites(extractor, ["decoder.final", "decoder.layer.0"]) == ["decoder.layer.0", "decoder.final"]
    assert resolve_decoder_sites(extractor, "all") == ["decoder.layer.0", "decoder.final"]
    assert resolve_decoder_sites(extractor, ("all",)) == resolve_decoder_sites(extractor, "every:2") == ["decoder.layer.0", "decoder.final"]
    assert extractor.resolve_sites(("all",)) == list(extractor.site_table())  # one selection for encoder and decoder sites
    with pytest.raises(UnknownSiteError, match="--sites every:0: give every:K"):
        resolve_decoder_sites(extractor, "every:0")
    with pytest.raises(UnknownSiteError, match="unknown decoder site.*encoder.layer.0 for whisper; valid sites: decoder.layer.0, decoder.final"):
        resolve_decoder_sites(extractor, ["encoder.layer.0"])
    with pytest.raises(DecoderError, match="zeroswot has no text decoder"):
        decoder_site_table(tiny_extractor("zeroswot"))


class _SentencePieceLike:
    """Decodes like SentencePiece: word-initial pieces carry ``▁``, and the text's leading space is dropped."""

    vocabulary = {0: "▁Hola", 1: ",", 2: "▁mun", 3: "do", 4: "</s>"}

    def decode(self, ids, skip_special_tokens=True):
        pieces = [self.vocabulary[i] for i in ids if not (skip_special_tokens and i == 4)]
        return "".join(pieces).replace("▁", " ").lstrip()


class _ByteLevelLike:
    """Decodes bytes: a character split over two tokens is a replacement character until both are there."""

    vocabulary = {0: b"caf", 1: b"\xc3", 2: b"\xa9", 3: b" bien"}

    def decode(self, ids, skip_special_tokens=True):
        return b"".join(self.vocabulary[i] for i in ids).decode("utf-8", errors="replace")


def test_token_pieces_join_to_the_text_with_the_spaces_and_split_characters_where_they_fall():
    assert token_pieces(_SentencePieceLike(), [0, 1, 2, 3, 4]) == ("Hola", ",", " mun", "do", "")
    assert token_pieces(_ByteLevelLike(), [0, 1, 2, 3]) == ("caf", "", "é", " bien")


class _FourByteLike:
    """The 4 bytes of 🙂 (f0 9f 99 82) over 4 tokens, the last with an 'a' after it."""

    vocabulary = {0: b"x ", 1: b"\xf0", 2: b"\x9f", 3: b"\x99", 4: b"\x82a", 5: b"\xff"}

    def decode(self, ids, skip_special_tokens=True):
        return b"".join(self.vocabulary[i] for i in ids).decode("utf-8", errors="replace")


def test_tokens_holding_leading_bytes_of_a_split_character_are_flagged():
    # é is c3 a9: token 1 holds its first byte (its prefix decodes to "caf" + a replacement character); token 2 completes it
    assert token_surface(_ByteLevelLike(), [0, 1, 2, 3]) == (("caf", "", "é", " bien"), (False, True, False, False))
    # three tokens hold leading bytes of 🙂, the fourth completes it; a byte that never completes a character (ff) is
    # in the text itself as a replacement character, so the token holding it is not flagged
    assert token_surface(_FourByteLike(), [0, 1, 2, 3, 4]) == (("x ", "", "", "", "🙂a"), (False, True, True, True, False))
    assert token_surface(_FourByteLike(), [0, 5, 0]) == (("x ", "\ufffd", "x "), (False, False, False))
    assert token_surface(_SentencePieceLike(), [0, 1, 2, 3, 4])[1] == (False,) * 5


# ---------------------------------------------------------------- the tokens beside a store's rows


def _token_part(folder, tokens, rows=None):
    from extract.store import TokenPartWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = TokenPartWriter(folder / "part-00000.h5", {"decoder.final": 2}, "float32", {"model_id": "x", "config": {"kind": "decoder_states"}})
    for index, generated in enumerate(tokens):
        states = {"decoder.final": np.full((rows or len(generated), 2), index, dtype=np.float32)}
        writer.add(f"u{index}", states, {"gender": "female", "speaker": f"s{index}"}, tokens=generated)
    return writer.close()


def test_token_rows_are_stored_aligned_with_each_utterance_s_rows(tmp_path):
    from extract.store import GeneratedTokens, ShardReader

    tokens = [GeneratedTokens((5, 6, 2), ("Hola", " mundo", "")), GeneratedTokens((2,), ("",))]
    _token_part(tmp_path, tokens)
    reader = ShardReader(tmp_path)
    assert [reader.tokens(u) for u in reader.ids] == tokens
    assert reader.tokens("u0").hypothesis == "Hola mundo"
    assert reader.stored_lengths("decoder.final").tolist() == [3, 1]
    np.testing.assert_array_equal(reader.get("decoder.final", "u1"), [[1.0, 1.0]])


def test_rows_that_are_not_one_per_token_are_refused_and_damaged_tokens_are_named(tmp_path):
    import h5py

    from extract.store import DamagedPartError, GeneratedTokens, ShardReader, StoreError

    with pytest.raises(StoreError, match="utterance u0: site decoder.final has 2 rows for 3 generated tokens"):
        _token_part(tmp_path / "a", [GeneratedTokens((5, 6, 2), ("a", "b", ""))], rows=2)
    with pytest.raises(StoreError, match="2 token ids but 1 token pieces"):
        GeneratedTokens((1, 2), ("a",))
    part = _token_part(tmp_path / "b", [GeneratedTokens((5, 2), ("a", ""))])
    with h5py.File(part, "r+") as handle:
        handle["tokens/ids"][0] = 7
    with pytest.raises(DamagedPartError, match="its generated tokens differ from their recorded sha256"):
        ShardReader(part).tokens("u0")


def test_holds_next_flags_are_stored_checked_and_absent_from_older_parts(tmp_path):
    import h5py

    from extract.store import DamagedPartError, GeneratedTokens, ShardReader, StoreError

    flagged = [GeneratedTokens((1, 2, 3), ("caf", "", "é"), (False, True, False)), GeneratedTokens((4,), ("x",), (False,))]
    _token_part(tmp_path / "new", flagged)
    assert [ShardReader(tmp_path / "new").tokens(u) for u in ("u0", "u1")] == flagged
    with h5py.File(tmp_path / "new" / "part-00000.h5", "r+") as handle:
        handle["tokens/holds_next"][1] = 0
    with pytest.raises(DamagedPartError, match="its generated tokens differ from their recorded sha256"):
        ShardReader(tmp_path / "new").tokens("u0")
    _token_part(tmp_path / "old", [GeneratedTokens((1, 2, 3), ("caf", "", "é"))])  # as parts were written before the flags
    assert ShardReader(tmp_path / "old").tokens("u0").holds_next is None
    with pytest.raises(StoreError, match="2 token ids but 1 holds_next flags"):
        GeneratedTokens((1, 2), ("a", "b"), (True,))
    with pytest.raises(StoreError, match="utterance u1: its tokens lack holds_next flags and the part's earlier ones do not"):
        _token_part(tmp_path / "mixed", [flagged[0], GeneratedTokens((4,), ("x",))])


# ---------------------------------------------------------------- outputs of different lengths, beam search


def _stepwise_states(extractor, inputs, generated, sites):
    """The decoder run as generation runs it, one step at a time with its key-value cache, on each
    utterance's chosen output (prompt, forced and generated tokens, right-padded with 0): the state
    at the last position of step k is the one that generated the k-th token after the prompt."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    table = decoder_site_table(extractor)
    longest = max(len(tokens) for tokens in generated.tokens)
    rows = torch.tensor([forced + tokens + [0] * (longest - len(tokens)) for forced, tokens in zip(generated.forced, generated.tokens)])
    steps = {site: [] for site in sites}
    handles = [
        extractor.model.get_submodule(table[site].module).register_forward_hook(
            lambda module, args, output, site=site: steps[site].append((output[0] if isinstance(output, tuple) else output)[:, -1].clone())
        )
        for site in sites
    ]
    masks = {"attention_mask": inputs["attention_mask"]} if "attention_mask" in inputs else {}
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())  # updated in place at every step
    # transformers 5 renamed forward's past_key_values to cache (the old name warns; gone in 5.40)
    cache_keyword = "cache" if "cache" in inspect.signature(extractor.model.forward).parameters else "past_key_values"
    try:
        with torch.inference_mode(), quiet_transformers():
            step_inputs = generated.prompt
            for column in range(rows.shape[1]):
                encoded = (generated.encoder_output,)
                extractor.model(encoder_outputs=encoded, decoder_input_ids=step_inputs, use_cache=True, **{cache_keyword: cache}, **masks)
                step_inputs = rows[:, column : column + 1]
    finally:
        for handle in handles:
            handle.remove()
    return {site: torch.stack(values, dim=1).numpy() for site, values in steps.items()}  # [B, steps, D]


def _end_early(generator, utterance: int, beams: int, at_call: int):
    """Makes the end of sequence win for ``utterance`` (its ``beams`` rows of the expanded batch) at
    decoder call ``at_call`` of the next generation, so that outputs in one batch differ in length."""
    end = generator.generation_config.eos_token_id
    end = end[0] if isinstance(end, list) else end
    calls = []

    def hook(module, args, output):
        calls.append(None)
        if len(calls) - 1 == at_call:
            output = output.clone()
            output[utterance * beams : (utterance + 1) * beams, -1, end] += 1e4
        return output

    return generator.extractor.model.get_output_embeddings().register_forward_hook(hook)


@pytest.mark.parametrize(
    "family, beams",
    [("whisper", 1), ("whisper", 3), ("seamless", 1), ("seamless", 2), ("s2t", 1), ("s2t", 2)],
)
def test_outputs_of_different_lengths_and_beam_search_give_the_states_of_a_stepwise_decoding(family, beams):
    make, task, tgt_lang = FAMILIES[family]
    generator = make()
    generator.overrides = {**generator.overrides, "num_beams": beams}
    target = tgt_lang or "en"
    forced = generator.forced_tokens(target)
    extractor = generator.extractor
    inputs = extractor.on_device(extractor.prepare(_audios((1.0, 0.6, 0.8))).inputs)
    sites = list(decoder_site_table(extractor))
    handle = _end_early(generator, utterance=1, beams=beams, at_call=forced + 1)
    try:
        generated = generate_with_prompt(generator, inputs, "en", task, target)
    finally:
        handle.remove()
    lengths = [len(tokens) for tokens in generated.tokens]
    assert lengths[1] == 2 and lengths[1] < lengths[0], lengths  # a token, then the end of sequence; the others run on
    assert generated.tokens[1][-1] in np.atleast_1d(generator.generation_config.eos_token_id).tolist()
    forced_states = teacher_forced_states(extractor, inputs, generated, sites)
    stepwise = _stepwise_states(extractor, inputs, generated, sites)
    for index, tokens in enumerate(generated.tokens):
        for site in sites:
            expected = stepwise[site][index, forced : forced + len(tokens)]
            np.testing.assert_allclose(forced_states[index][site].numpy(), expected, atol=1e-5, rtol=1e-4, err_msg=f"{family} {site} utterance {index}")
