"""The decoder's states while it generates: one row per generated token, for each decoder site.

For a batch, the family's generator decodes as ``transcribe`` does (same language forcing, same
decoding settings); then the decoder runs once more, teacher-forced on each chosen output (the
prompt it was given and the tokens it generated) with the encoder's output of the generation (the
encoder runs once), and each decoder site's output is captured.

**Which state a row holds.** Row ``j`` of an utterance is the decoder's state at the step that
generated its token ``j``: the position whose input is the token before it (the prompt's last
token for ``j = 0``), whose output distribution chose token ``j``. The decoder is causal, so that
state depends only on the encoder output and the tokens before it: running the whole chosen
sequence at once gives the states the decoder had while it generated it (with its key-value cache,
one step at a time), within float rounding; also under beam search, where a capture during
generation would have to follow the beams' reordering (``tests/extract/test_decoder.py`` checks it
token by token on the tiny random Whisper, SeamlessM4T and S2T). The state that has *read* token ``j`` is row ``j + 1``.

**Which tokens.** The generated tokens, up to and including the end-of-sequence token where the
decoder produced one (its row is the state that has read the last word). The prompt (Whisper's
start, language, task and no-timestamps tokens; SeamlessM4T's start and target-language tokens;
S2T's start token) is left out, found as what the decoder was given at its first step; so are
tokens forced through the logits after it (S2T's target-language BOS:
:meth:`Generator.forced_tokens`). Each row carries its token id and surface string
(:class:`extract.store.GeneratedTokens`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from extract.errors import UserError
from extract.families.base import Extractor, select_sites
from extract.families.generation import GenerationError, Generator, check_task, quiet_transformers
from extract.hooks import Site, _first_tensor, capture
from extract.store import GeneratedTokens


class DecoderError(UserError, ValueError):
    """A model or request the decoder states cannot serve (a family without a text decoder)."""


def check_family(family: str) -> None:
    """A family whose model holds no text decoder (``Extractor.decoder_path`` None) is refused, before anything loads."""
    from extract.families import FAMILIES

    if FAMILIES[family].extractor.decoder_path is None:
        served = ", ".join(name for name, entry in FAMILIES.items() if entry.extractor.decoder_path is not None)
        raise DecoderError(f"{family} has no text decoder in its model ({FAMILIES[family].extractor.no_decoder}); decoder states are extracted for {served}")


def decoder_site_table(extractor: Extractor) -> dict[str, Site]:
    """``decoder.layer.{i}`` (the output of decoder layer i, from 0) and ``decoder.final`` (after the
    decoder's final layer norm: what the output projection reads), in forward order."""
    check_family(extractor.family)
    path = extractor.decoder_path
    decoder = extractor.model.get_submodule(path)
    table = {f"decoder.layer.{index}": Site(f"{path}.layers.{index}") for index in range(len(decoder.layers))}
    table["decoder.final"] = Site(f"{path}.layer_norm")
    return table


def resolve_decoder_sites(extractor: Extractor, requested: str | list[str]) -> list[str]:
    """``all``, ``every:K`` or names, in forward order (as :meth:`Extractor.resolve_sites` resolves encoder sites)."""
    return select_sites(list(decoder_site_table(extractor)), requested, extractor.family, "decoder site")


@dataclass
class DecodedUtterance:
    """One utterance's generated tokens and its states at each decoder site (``[tokens, D]``)."""

    tokens: GeneratedTokens
    states: dict[str, np.ndarray]


@dataclass
class Generated:
    """What a batch's generation gave: the encoder's output the decoder attended to, the decoder's
    prompt ``[B, p]`` (what it was given at its first step), the tokens forced after it per utterance
    (:meth:`Generator.forced_tokens`), and the generated token ids per utterance (padding after the
    end of sequence left out, the end-of-sequence token kept)."""

    encoder_output: torch.Tensor
    prompt: torch.Tensor
    forced: list[list[int]]
    tokens: list[list[int]]


def generate_with_prompt(generator: Generator, inputs: dict[str, torch.Tensor], language: str, task: str, target: str) -> Generated:
    """Generate as :meth:`Generator.generate` does, keeping the encoder's output (so that the
    teacher-forced pass need not run the encoder again) and the prompt the decoder was given."""
    first_call: list[torch.Tensor] = []
    encoded: list[torch.Tensor] = []

    def record(module, args, kwargs):
        if not first_call:
            first_call.append(kwargs["input_ids"] if kwargs.get("input_ids") is not None else args[0])

    decoder = generator.model.get_submodule(generator.extractor.decoder_path)
    handles = [
        decoder.register_forward_pre_hook(record, with_kwargs=True),
        generator.model.get_encoder().register_forward_hook(lambda module, args, output: encoded.append(_first_tensor(output))),
    ]
    overrides = generator.overrides
    generator.overrides = {**overrides, "return_dict_in_generate": True}  # the whole output: prompt and end of sequence (Whisper's plain one drops both)
    try:
        with torch.inference_mode(), quiet_transformers():
            sequences = generator._generate(inputs, language, task, target).sequences
    finally:
        generator.overrides = overrides
        for handle in handles:
            handle.remove()
    if len(encoded) != 1:
        raise GenerationError(f"{generator.family}: the encoder ran {len(encoded)} times in one generation, not once")
    batch = sequences.shape[0]
    prompt = first_call[0][:: first_call[0].shape[0] // batch].to(sequences.device)  # one row per utterance (beams repeat it)
    p = prompt.shape[1]
    if sequences.shape[1] < p or not bool((sequences[:, :p] == prompt).all()):
        raise GenerationError(f"{generator.family}: the generated sequences do not start with the prompt the decoder was given")
    sequences = sequences[:, p:]
    eos = generator.generation_config.eos_token_id
    ends = set(eos if isinstance(eos, list) else [eos]) - {None}
    forced = generator.forced_tokens(target)
    generated = []
    for row in sequences.tolist():
        kept = []
        for token in row[forced:]:
            kept.append(token)
            if token in ends:
                break
        if not kept:
            raise GenerationError(f"{generator.family}: a generation ended with the {forced} token(s) it forces and none generated; raise --max-new-tokens")
        generated.append(kept)
    return Generated(encoded[0], prompt, [row[:forced] for row in sequences.tolist()], generated)


def teacher_forced_states(extractor: Extractor, inputs: dict[str, torch.Tensor], generated: Generated, sites: list[str]) -> list[dict[str, torch.Tensor]]:
    """Each utterance's states at ``sites`` for its generated tokens: the decoder run once on the
    prompt, the forced tokens and the generated tokens (right-padded: the decoder is causal, so
    padding after a sequence's end changes none of its states) with the encoder's output of the
    generation (the encoder does not run again; the inputs' attention mask, where the family has
    one, masks its padding as in generation), rows taken at the positions that generated each
    token. The forward pass stops after the last site (the output projection never runs)."""
    table = decoder_site_table(extractor)
    longest = max(len(tokens) for tokens in generated.tokens)
    rows = [forced + tokens + [0] * (longest - len(tokens)) for forced, tokens in zip(generated.forced, generated.tokens)]
    prompt = generated.prompt
    decoder_input = torch.cat([prompt, torch.tensor(rows, dtype=prompt.dtype, device=prompt.device)], dim=1)[:, :-1]
    with torch.inference_mode(), quiet_transformers(), capture(extractor.model, {name: table[name] for name in sites}) as (captured, run):
        masks = {"attention_mask": inputs["attention_mask"]} if "attention_mask" in inputs else {}
        run(extractor.model, encoder_outputs=(generated.encoder_output,), decoder_input_ids=decoder_input, **masks)
    first = prompt.shape[1] - 1 + len(generated.forced[0])
    return [{name: captured.tensors[name][index, first : first + len(tokens)] for name in sites} for index, tokens in enumerate(generated.tokens)]


def token_pieces(tokenizer, ids: list[int]) -> tuple[str, ...]:
    """Each token's surface string: the characters it adds to the decoded text (special tokens left
    out). Found from the decoded prefixes, since a token decoded alone loses what its neighbours
    change (SentencePiece's leading space, a character split over byte tokens): token k covers the
    characters from the end of the longest prefix of the full text that the first k tokens decode to,
    to that of the first k + 1; so the pieces join to the decoded text exactly."""
    return token_surface(tokenizer, ids)[0]


REPLACEMENT = "\ufffd"  # what a decoder gives for the bytes of a character whose last byte has not come yet


def token_surface(tokenizer, ids: list[int]) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """(:func:`token_pieces`, ``holds_next``): ``holds_next[k]`` is true when token k holds leading
    bytes of a character that a later token completes (a byte-level token such as Whisper's ``Ç``,
    the first byte of ``ǆ``): the first k + 1 tokens decode to the text so far plus a replacement
    character the full text does not have there. That character is the first one after token k's
    piece, so the token belongs to the word holding it too, though its piece cannot show it."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    ends, holds_next = [0], []
    for count in range(1, len(ids) + 1):
        prefix = tokenizer.decode(ids[:count], skip_special_tokens=True)
        common = len(os.path.commonprefix([prefix, text]))
        ends.append(max(ends[-1], common))
        holds_next.append(REPLACEMENT in prefix[common:])
    ends[-1] = len(text)
    return tuple(text[start:end] for start, end in zip(ends[:-1], ends[1:])), tuple(holds_next)


def decoder_states(generator: Generator, audios: list[np.ndarray], sites: list[str], language: str, task: str, tgt_lang: str | None) -> list[DecodedUtterance]:
    """Generate for a batch that shares a source language, then the teacher-forced states at
    ``sites`` (names of :func:`decoder_site_table`) for each utterance's generated tokens."""
    check_task(task, tgt_lang)
    target = tgt_lang if task == "st" else language
    extractor = generator.extractor
    inputs = generator.model_inputs(audios, task, tgt_lang)
    generated = generate_with_prompt(generator, inputs, language, task, target)
    states = teacher_forced_states(extractor, inputs, generated, sites)
    return [
        DecodedUtterance(
            GeneratedTokens(tuple(tokens), *token_surface(generator.tokenizer, tokens)), {name: state[name].float().cpu().numpy() for name in sites}
        )
        for tokens, state in zip(generated.tokens, states)
    ]
