"""Activation patching between utterances: run a model on a target utterance A while the states at
one site come from a source utterance B, and generate from that.

For a batch of (A, B) pairs and a site, :func:`capture_sources` runs the encoder once on the B's
(stopping after the last wanted site) and keeps their states; :func:`patched_generation` then runs
the generator on the A's with a hook at the site (:func:`extract.hooks.edit`, the mechanism the
interventions of ``extract.interventions`` use) that overwrites each A's states there by its B's.
Everything downstream of the site (the later layers, the decoder) runs on the patched states;
everything upstream is A's own.

Several sites can be patched in the same pass (:func:`patched_together`): each is overwritten by
B's states there, so a later site first runs on the earlier sites' patched states and then has the
frames the rule below gives replaced by B's; its frames left as they were (A's speech beyond B's
length, A's padding) carry the earlier patches with them. Each site's frames are counted on its own
(its own rule, its own lengths), the target's from its unpatched pass (:func:`target_frames`).

Which frames are replaced (the target's frame index i takes the source's frame i; frames are never
shifted, stretched or resampled):

- **speech frames** (the default): frames ``0 .. min(speech(A), speech(B)) - 1``, where
  ``speech(X)`` is :meth:`Extractor.speech_frames` of X at the site. When B is shorter, A's frames
  beyond B's length are kept (A's own states); when B is longer, B's frames beyond A's length are
  not used. A's padding is never touched: in a family that pads a batch to its longest input
  (S2T, SeamlessM4T, ZeroSwot) ``speech(X)`` counts X's own frames only (:func:`target_frames`),
  never the padding its batch-mates add. For Whisper, whose encoder always sees a 30 s window of
  1500 frames, this leaves A's padding frames as they were; from the first layer on they have
  attended to A's speech, so they carry some of A (see ``docs/stages/patching.md``). Pairs matched
  by duration (``experiments.patching.pairs``) keep the kept or unused frames few.
- **a frame span** ``START:END`` (:class:`FrameSpan`, END exclusive, either side may be left
  open): frames ``START .. min(END, frames(A), frames(B)) - 1``, where ``frames(X)`` is the number
  of frames X has at the site when run: for Whisper all 1500 of its window (its padding included),
  for the families that pad a batch to its longest input the utterance's own frames (B is captured
  alone for this: :func:`capture_sources` with ``alone=True``; A's own frames are counted in its
  batch by :func:`target_frames`, so the padding its batch-mates add is never patched and its
  result does not depend on them). ``0:1500`` on Whisper patches the whole window, the padding
  included. A span that starts at or past those frames replaces none (``replaced`` 0).

Which states are replaced (``component``):

- **residual** (the default): the site's own states, for an encoder layer its output, the whole
  residual stream. Every later layer reads only that stream, so replacing all of a target's frames
  there makes the rest of the encoder run on the source's states: the output follows the source at
  every site alike (see ``docs/stages/patching.md``, "What a site comparison can show").
- **attention** or **mlp**: the output of the layer's self-attention block or of its MLP block
  (:attr:`Extractor.layer_components`), which the layer adds back into the residual stream. The
  target's residual stream (its input to the layer, and what the other block adds) stays its own,
  so the patch moves one block's contribution at one layer. Only ``encoder.layer.K`` sites have
  components; a family declares which it has (a conformer layer has no single MLP block).

The frame rules below are the same for every component: a block's output has its layer's frames.

A site that reads a derived view of its module (a ``select`` or ``transform`` in the site table)
cannot be patched, as it cannot be edited. A patch that never ran (the forward stopped before the
site) is an error, never a silent "no effect".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from extract.errors import UserError

if TYPE_CHECKING:
    import torch

    from extract.families.base import Extractor
    from extract.families.generation import Generator
    from extract.hooks import Site


class PatchError(UserError, ValueError):
    """A patch that cannot be made as asked: an unknown or derived site, a bad frame span, a batch that does not match."""


RESIDUAL = "residual"
COMPONENTS = (RESIDUAL, "attention", "mlp")  # what is replaced at a site (the module docstring)
_LAYER = re.compile(r"encoder\.layer\.\d+")


@dataclass(frozen=True)
class FrameSpan:
    """Frames ``start`` (inclusive) to ``end`` (exclusive; None: to the last frame both utterances have)."""

    start: int = 0
    end: int | None = None

    def __post_init__(self):
        if self.start < 0 or (self.end is not None and self.end <= self.start):
            raise PatchError(f"frame span {self}: give START:END with 0 <= START < END (END may be left out)")

    def __str__(self) -> str:
        return f"{self.start}:{'' if self.end is None else self.end}"


SPEECH = "speech"  # how rows and settings name the default (no span): every speech frame both utterances have


def parse_frames(text: str | None) -> FrameSpan | None:
    """``--frames``: None or ``speech`` (the speech frames), or ``START:END`` (either may be empty)."""
    if text is None or text == SPEECH:
        return None
    if re.fullmatch(r"\s*-\s*\d+\s*:.*", text):
        raise PatchError(f"--frames {text!r}: frames are counted from 0 at the site; START may not be negative")
    match = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text)
    if match is None:
        raise PatchError(f"--frames {text!r}: give 'speech' or START:END in frames (e.g. 0:50, 100:)")
    start, end = match.groups()
    return FrameSpan(int(start) if start else 0, int(end) if end else None)


def frames_label(span: FrameSpan | None) -> str:
    return SPEECH if span is None else str(span)


def component_table(extractor: Extractor, component: str = RESIDUAL) -> dict[str, Site]:
    """What a patch of ``component`` overwrites, by site name, in forward order: for ``residual`` the
    sites of the model's table that are not a derived view; for a block (``attention``, ``mlp``) the
    output of that block of each ``encoder.layer.K`` site's layer (:attr:`Extractor.layer_components`)."""
    from extract.hooks import Site

    table = extractor.site_table()
    if component == RESIDUAL:
        return {name: site for name, site in table.items() if site.select is None and site.transform is None}
    if component not in COMPONENTS:
        raise PatchError(f"component {component!r}: choose one of {', '.join(COMPONENTS)}")
    blocks = type(extractor).layer_components
    if component not in blocks:
        offered = ", ".join([RESIDUAL, *blocks])
        raise PatchError(f"{extractor.family} declares no {component} block in its encoder layers; patch --component {offered}")
    return {name: Site(f"{site.module}.{blocks[component]}") for name, site in table.items() if _LAYER.fullmatch(name) and site.take == "output"}


def patchable_sites(extractor: Extractor, component: str = RESIDUAL) -> list[str]:
    """The sites a patch of ``component`` can overwrite (:func:`component_table`), in forward order."""
    return list(component_table(extractor, component))


def check_site(extractor: Extractor, site: str, component: str = RESIDUAL) -> None:
    """Refuse a site the model lacks, one that reads a derived view (it cannot be overwritten), or,
    for a block component, a site that is not an encoder layer."""
    table = extractor.site_table()
    if site not in table:
        raise PatchError(f"unknown site {site!r} for {extractor.family}; valid sites: {', '.join(table)}")
    if site not in component_table(extractor, component):
        if component != RESIDUAL:
            fix = f"--component {component} patches encoder.layer.K sites; patch {site} with --component residual"
            raise PatchError(f"site {site} has no {component} block of its own: {fix}")
        raise PatchError(f"site {site} is a derived view of its module's output and cannot be patched; choose another site")


@dataclass
class SourceStates:
    """One source utterance's states at the sites: ``states[site]`` [frames, D] (on the model's
    device, in its dtype), ``frames[site]`` the frames that may be used (see the module docstring)."""

    states: dict[str, torch.Tensor]
    frames: dict[str, int]


def capture_sources(
    extractor: Extractor,
    audios: Sequence[np.ndarray],
    sites: Sequence[str],
    span: FrameSpan | None,
    alone: bool = False,
    component: str = RESIDUAL,
) -> list[SourceStates]:
    """The states of ``audios`` at ``sites`` (one encoder pass, stopped after the last site; with
    ``alone``, one pass per utterance, so that a padding family's frames are the utterance's own),
    of ``component`` there (:func:`component_table`).
    The usable frames are the speech frames without ``span``, all the utterance's frames with one."""
    import torch

    from extract.hooks import capture

    for site in sites:
        check_site(extractor, site, component)
    if alone and len(audios) > 1:
        return [source for audio in audios for source in capture_sources(extractor, [audio], sites, span, component=component)]
    table = component_table(extractor, component)
    prepared = extractor.prepare(list(audios))
    inputs = extractor.on_device(prepared.inputs)
    wanted = {**{site: table[site] for site in sites}, **extractor.auxiliary_sites(list(sites))}
    with torch.inference_mode(), capture(extractor.model, wanted) as (captured, run):
        run(extractor.encode, inputs)
    own = _own_lengths(extractor, sites, prepared, captured.tensors)
    sources = []
    for row, samples in enumerate(prepared.samples):
        states = {site: captured.tensors[site][row] for site in sites}
        lengths = {site: states[site].shape[0] if own is None else min(int(own[site][row]), states[site].shape[0]) for site in sites}
        if span is None:
            frames = {site: extractor.speech_frames(site, int(samples), lengths[site]) for site in sites}
        else:
            frames = lengths
        sources.append(SourceStates(states, frames))
    return sources


def _pads_batch(prepared) -> bool:
    """Whether the family pads a batch to its longest input (its inputs carry an attention mask:
    S2T, SeamlessM4T, ZeroSwot), rather than giving every input a fixed window (Whisper)."""
    return "attention_mask" in prepared.inputs


def _own_lengths(extractor: Extractor, sites: Sequence[str], prepared, captured: dict) -> dict[str, np.ndarray] | None:
    """Per site, each utterance's own frames in a padded batch (:meth:`Extractor.stored_lengths`), or
    None where the family does not pad a batch (every frame of the window is the utterance's)."""
    if not _pads_batch(prepared):
        return None
    return {site: np.asarray(extractor.stored_lengths(site, prepared, captured)) for site in sites}


@dataclass(frozen=True)
class TargetFrames:
    """Each target's own frames per site in a batch padded to its longest input (:func:`target_frames`);
    ``per_site`` None where the family does not pad a batch (a target's frames are all its window's)."""

    per_site: dict[str, list[int]] | None

    def at(self, site: str) -> list[int] | None:
        if self.per_site is None:
            return None
        if site not in self.per_site:
            raise PatchError(f"the targets' frames were counted at {', '.join(self.per_site)}, not at {site}")
        return self.per_site[site]

    def rows(self, indices: Sequence[int]) -> TargetFrames:
        """These frames for the targets at ``indices`` (a site patched for part of a batch)."""
        if self.per_site is None:
            return self
        return TargetFrames({site: [lengths[index] for index in indices] for site, lengths in self.per_site.items()})


def target_frames(extractor: Extractor, audios: Sequence[np.ndarray], sites: Sequence[str]) -> TargetFrames:
    """The own frames at each of ``sites`` of each of ``audios`` run as one batch, counted once for
    every site a batch patches. Only the features are computed, unless the family needs a mask from
    the forward pass (ZeroSwot's post-adapter site): then one encoder pass for all the sites."""
    import torch

    from extract.hooks import capture

    prepared = extractor.prepare(list(audios))
    if not _pads_batch(prepared):
        return TargetFrames(None)
    auxiliary = extractor.auxiliary_sites(list(sites))
    captured: dict = {}
    if auxiliary:
        with torch.inference_mode(), capture(extractor.model, auxiliary) as (seen, run):
            run(extractor.encode, extractor.on_device(prepared.inputs))
        captured = seen.tensors
    own = _own_lengths(extractor, sites, prepared, captured)
    return TargetFrames({site: [int(length) for length in own[site]] for site in sites})


@dataclass
class PatchReport:
    """What one patched generation replaced: per row, the target's frames at the site and the first and
    last-plus-one frame replaced (``replaced`` = ``end - start``, 0 where the source had none there)."""

    target_frames: list[int]
    start: list[int]
    end: list[int]

    @property
    def replaced(self) -> list[int]:
        return [max(0, end - start) for start, end in zip(self.start, self.end)]


def patched_bounds(span: FrameSpan | None, target_frames: int, source_frames: int) -> tuple[int, int]:
    """The frames ``[start, end)`` of the target that take the source's states (the module docstring's rule);
    ``target_frames``: the target's speech frames without a span, its frames at the site with one."""
    start = 0 if span is None else span.start
    end = min(target_frames, source_frames, *(() if span is None or span.end is None else (span.end,)))
    return start, max(start, end)


@contextmanager
def patched(
    extractor: Extractor,
    sites: Sequence[str],
    sources: Sequence[SourceStates],
    samples: Sequence[int],
    span: FrameSpan | None,
    own: TargetFrames | None = None,
    component: str = RESIDUAL,
) -> Iterator[dict[str, PatchReport]]:
    """While inside, the forward passes of ``extractor``'s model (a batch of ``len(sources)`` targets
    of ``samples`` input samples each) have their states at every one of ``sites`` overwritten by the
    sources' (:func:`patched_bounds`; several sites: the module docstring). ``own``: :func:`target_frames`
    (None: every frame a site has); the sources must hold ``component``. Each site's hook must run
    exactly once inside (one generation: its encoder runs once); the reports yielded (one per site)
    are filled when they have."""
    from extract.hooks import edit

    if not sites:
        raise PatchError("no site to patch")
    for site in sites:
        check_site(extractor, site, component)
    if len(set(sites)) != len(sites):
        raise PatchError(f"sites {', '.join(sites)}: a site is given twice; patch each site once")
    if len(sources) != len(samples):
        raise PatchError(f"{len(sources)} sources for {len(samples)} targets")
    reports = {site: PatchReport([], [], []) for site in sites}
    fired: set[str] = set()

    def overwriting(site: str, lengths: Sequence[int] | None):
        if lengths is not None and len(lengths) != len(samples):
            raise PatchError(f"the own frames of {len(lengths)} targets at {site} for a batch of {len(samples)}")
        report = reports[site]

        def overwrite(states: torch.Tensor) -> torch.Tensor:
            if site in fired:
                raise PatchError(f"site {site} ran twice in one patched pass (patch one forward pass at a time)")
            if states.ndim != 3 or states.shape[0] != len(sources):
                raise PatchError(f"site {site}: states of shape {tuple(states.shape)} for a batch of {len(sources)} targets")
            frames = states.shape[1]
            result = states.clone()
            for row, (source, count) in enumerate(zip(sources, samples)):
                given = source.states[site]
                if given.shape[-1] != states.shape[-1]:
                    raise PatchError(f"site {site}: source states of size {given.shape[-1]}, the target's have {states.shape[-1]}")
                own_frames = frames if lengths is None else min(int(lengths[row]), frames)
                target_frames = extractor.speech_frames(site, int(count), own_frames) if span is None else own_frames
                start, end = patched_bounds(span, target_frames, min(source.frames[site], given.shape[0]))
                result[row, start:end] = given[start:end].to(device=states.device, dtype=states.dtype)
                report.target_frames.append(target_frames)
                report.start.append(start)
                report.end.append(end)
            fired.add(site)
            return result

        return overwrite

    table = component_table(extractor, component)
    with edit(extractor.model, {site: (table[site], overwriting(site, None if own is None else own.at(site))) for site in sites}):
        yield reports
    missing = [site for site in sites if site not in fired]
    if missing:
        raise PatchError(f"the patch at {', '.join(missing)} never ran: the forward pass stopped before that site")


def patched_together(
    generator: Generator,
    sites: Sequence[str],
    targets: Sequence[np.ndarray],
    sources: Sequence[SourceStates],
    language: str,
    task: str,
    tgt_lang: str | None,
    span: FrameSpan | None = None,
    own: TargetFrames | None = None,
    component: str = RESIDUAL,
    generate: Callable[[list[np.ndarray]], object] | None = None,
) -> tuple[object, dict[str, PatchReport]]:
    """Hypotheses for the ``targets`` (one batch sharing ``language``) with their states (of
    ``component``) at every one of ``sites`` replaced by the ``sources``' in one generation (see
    :func:`capture_sources` and :func:`patched`), and what was replaced at each site. ``own``: the
    targets' own frames (:func:`target_frames`, counted once for every site of a batch); counted here
    when not given. ``generate(targets)``: what runs patched, in place of the generator's plain
    generation (it must run the encoder once: :func:`extract.forced.generate_scored` does)."""
    own = target_frames(generator.extractor, targets, sites) if own is None else own
    with patched(generator.extractor, sites, sources, [len(audio) for audio in targets], span, own, component) as reports:
        if generate is None:
            hypotheses = generator.generate(list(targets), language, task, tgt_lang)
        else:
            hypotheses = generate(list(targets))
    return hypotheses, reports


def patched_generation(
    generator: Generator,
    site: str,
    targets: Sequence[np.ndarray],
    sources: Sequence[SourceStates],
    language: str,
    task: str,
    tgt_lang: str | None,
    span: FrameSpan | None = None,
    own: TargetFrames | None = None,
    component: str = RESIDUAL,
) -> tuple[list[str], PatchReport]:
    """:func:`patched_together` at one site: the hypotheses and what was replaced there."""
    hypotheses, reports = patched_together(generator, [site], targets, sources, language, task, tgt_lang, span, own, component)
    return hypotheses, reports[site]
