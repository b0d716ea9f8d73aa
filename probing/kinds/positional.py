"""The positional kind: one logistic probe per frame position (the first ``--positions``)."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

import probing.kinds.logistic as logistic
from probing import features, metrics
from probing.kinds.base import ProbeKind
from probing.mdl import OnlineCode


def run(config, reader, splits, labels):
    """Per-position probes, a chunk of positions at a time (positions are independent): each chunk is
    read, standardized with its training statistics, fitted, scored and MDL-coded, so memory follows
    ``config.memory_gb`` rather than N x P x D. When that takes more than one chunk, the positions are
    first copied position-major to a scratch file under ``$TMPDIR`` (N x P x D in the store's dtype),
    deleted afterwards."""
    ids = {n: getattr(splits, n).ids for n in ("train", "test")}  # positional probes select nothing on dev
    stored = {n: reader.stored_lengths(config.site, ids[n]) for n in ids}
    width = min(config.positions, int(max(stored["train"].max(), stored["test"].max())))
    masks = {n: features.valid_mask(np.minimum(stored[n], width), width) for n in ids}
    step = features.positions_per_chunk(config.memory_gb, len(ids["train"]) + len(ids["test"]), reader.dim(config.site), width)
    scores, codes = [], []  # per chunk (not the fits: their features would hold every position)
    with contextlib.ExitStack() as stack:
        scratch = None
        if step < width:  # more than one chunk: one pass over the store into a position-major scratch file (see PositionMajorFile)
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="probe-positions-"))
            block = int(max(features.FLOAT32, (config.memory_gb - features.BASE_GB) * 2**30 / 4))
            scratch = features.write_position_major(reader, config.site, ids["train"] + ids["test"], width, Path(folder), block)
            stack.callback(scratch.close)
        for begin in range(0, width, step):
            end = min(begin + step, width)
            if scratch is not None:
                x = scratch.read(begin, end)
                x = {"train": x[: len(ids["train"])], "test": x[len(ids["train"]) :]}
            else:
                x = {n: reader.frames(config.site, begin, end, ids[n]) for n in ids}
            fitted = logistic.fit(config, x, {n: masks[n][:, begin:end] for n in ids}, labels, splits.train.speakers)
            scores.append(fitted.scores)
            codes.append(fitted.code)
    scores = {key: np.concatenate([part[key] for part in scores]) for key in scores[0]}
    lengths = logistic.lengths(reader, config.site, splits.test.ids)
    extra = {"f1_s": metrics.f1_s(scores["f1_macro"], lengths["mean_test_length"]), "positions_used": int(width)} | lengths
    code = join_codes(codes) if config.mdl else None
    span = slice(0, int(np.ceil(lengths["mean_test_length"])))
    return logistic.row(scores, span, extra, {"test_f1_ema": metrics.ema(scores["f1_macro"], 3)}, code, splits.class_names)


def join_codes(codes: list[OnlineCode]) -> OnlineCode:
    """Online codes of consecutive position chunks as one (blocks depend on labels and speakers only)."""
    chosen = None if codes[0].chosen is None else np.concatenate([code.chosen for code in codes], axis=1)
    bits = {key: np.concatenate([getattr(code, key) for code in codes]) for key in ("online_bits", "uniform_bits")}
    return replace(codes[0], chosen=chosen, **bits)


KINDS = (
    ProbeKind(
        "positional",
        run,
        "f1_s",
        "one logistic probe per frame position (the first --positions)",
        per_position=True,
        options=("positions", "memory_gb", *logistic.OPTIONS),
    ),
)
