"""Teacher-forced log-probabilities of given texts, beside the generation, with the encoder run once.

The graded metric of ``experiments.patch`` reads how likely the model finds a reference (ASR: the
transcript; ST: the reference translation and its other-gender version) on a run, patched or not.
:func:`generate_scored` generates for a batch as :meth:`Generator.generate` does (the same
hypotheses: :func:`extract.decoder.generate_with_prompt`, whose encoder runs once, so a patch hook
at an encoder site fires once), then runs the decoder teacher-forced on each text with the
encoder's output of that generation: the prompt the decoder was given, the tokens the family forces
after it (S2T's target-language BOS), then the text's tokens (:meth:`Generator.text_ids`). Token
``j``'s log-probability is the log-softmax of the model's logits (no decoding rule: no suppressed
tokens, no length penalty) at the position that predicts it, in nats. The end-of-sequence token is
not scored: the texts are scored, not where they stop.

Families whose model holds no text decoder (ZeroSwot's is a separate NLLB model) are refused
(:func:`extract.decoder.check_family`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from extract.families.generation import GenerationError, check_task, quiet_transformers

if TYPE_CHECKING:
    from extract.decoder import Generated
    from extract.families.base import Extractor
    from extract.families.generation import Generator


@dataclass(frozen=True)
class ForcedText:
    """A text's token ids (:meth:`Generator.text_ids`) and each token's log-probability (nats)."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    @property
    def mean(self) -> float:
        """The per-token log-probability (nats per token); NaN for a text of no tokens."""
        return float(np.mean(self.logprobs)) if self.logprobs else float("nan")


@dataclass
class Scored:
    """A batch's hypotheses and, per utterance, its texts' :class:`ForcedText` in the order given."""

    hypotheses: list[str]
    texts: list[list[ForcedText]]


def generate_scored(
    generator: Generator, audios: Sequence[np.ndarray], language: str, task: str, tgt_lang: str | None, texts: Sequence[Sequence[str]]
) -> Scored:
    """Hypotheses for ``audios`` (a batch sharing ``language``) and the teacher-forced log-probabilities
    of ``texts[i]`` (any number of texts, possibly none) on utterance ``i`` (the module docstring)."""
    from extract.decoder import check_family, generate_with_prompt

    check_task(task, tgt_lang)
    if len(texts) != len(audios):
        raise GenerationError(f"{len(texts)} groups of texts for {len(audios)} utterances")
    check_family(generator.family)
    target = tgt_lang if task == "st" else language
    extractor = generator.extractor
    inputs = generator.model_inputs(audios, task, tgt_lang)
    generated = generate_with_prompt(generator, inputs, language, task, target)
    hypotheses = [generator.tokenizer.decode(forced + tokens, skip_special_tokens=True).strip() for forced, tokens in zip(generated.forced, generated.tokens)]
    flat = [(row, list(generator.text_ids(text))) for row, group in enumerate(texts) for text in group]
    scores = _forced_logprobs(extractor, inputs, generated, flat)
    grouped: list[list[ForcedText]] = [[] for _ in audios]
    for (row, ids), logprobs in zip(flat, scores):
        grouped[row].append(ForcedText(tuple(ids), tuple(logprobs)))
    return Scored(hypotheses, grouped)


def _forced_logprobs(extractor: Extractor, inputs: dict[str, torch.Tensor], generated: Generated, flat: list[tuple[int, list[int]]]) -> list[list[float]]:
    """Each ``(row, ids)``'s token log-probabilities on utterance ``row``: one teacher-forced decoder
    pass for all of them (right-padded: the decoder is causal, so padding after a text changes none of its scores)."""
    scored = [(row, ids) for row, ids in flat if ids]
    if not scored:
        return [[] for _ in flat]
    rows = [row for row, _ in scored]
    index = torch.tensor(rows, device=generated.encoder_output.device)
    prompt = generated.prompt[rows]
    longest = max(len(generated.forced[row]) + len(ids) for row, ids in scored)
    tails = [generated.forced[row] + ids + [0] * (longest - len(generated.forced[row]) - len(ids)) for row, ids in scored]
    decoder_input = torch.cat([prompt, torch.tensor(tails, dtype=prompt.dtype, device=prompt.device)], dim=1)[:, :-1]
    masks = {"attention_mask": inputs["attention_mask"][index.to(inputs["attention_mask"].device)]} if "attention_mask" in inputs else {}
    with torch.inference_mode(), quiet_transformers():
        logits = extractor.model(encoder_outputs=(generated.encoder_output[index],), decoder_input_ids=decoder_input, **masks).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1)
    results = iter(
        [logprobs[k, prompt.shape[1] - 1 + len(generated.forced[row]) + j, token].item() for j, token in enumerate(ids)] for k, (row, ids) in enumerate(scored)
    )
    return [next(results) if ids else [] for _, ids in flat]
