"""What the logistic kinds (positional, mean, max, sampled) share: their options, logistic probes
fitted per position, scored on test and coded by MDL, and the row they give."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probing import features, metrics
from probing.mdl import DEFAULT_C_GRID, MIXTURE_GUARD, UNGUARDED, OnlineCode, online_code_logistic

OPTIONS = ("c", "max_iter")  # the ProbeConfig fields every logistic kind reads


@dataclass
class Fit:
    model: object
    x: dict  # standardized features per split (None for an empty split)
    predictions: np.ndarray  # [test utterances, positions]: the predicted class
    scores: dict  # test scores per position
    code: OnlineCode | None  # None without MDL


def standardized(config, x: dict, train_mask: np.ndarray) -> dict:
    """Features per split standardized with the training split's statistics (as they are with
    ``config.standardize`` off); an empty split's None stays None."""
    if not config.standardize:
        return x
    scaler = features.Standardizer.fit(x["train"], train_mask)
    return {n: scaler(v) if v is not None else None for n, v in x.items()}


def fit(config, x: dict, masks: dict, labels: dict, speakers: np.ndarray) -> Fit:
    """One logistic probe per position of ``x`` (``[N, P, D]`` per split, ``masks`` ``[N, P]``),
    scored on test, and its online code over the training ``speakers`` when ``config.mdl``."""
    from probing.train import fit_logistic

    x = standardized(config, x, masks["train"])
    model = fit_logistic(x["train"], labels["train"], masks["train"], c=config.c, max_iter=config.max_iter, device=config.device, seed=config.seed)
    predictions = (model.probabilities(x["test"]) > 0.5).astype(int)
    scores = metrics.position_scores(labels["test"], predictions, masks["test"])
    code = online_code_logistic(x["train"], labels["train"], masks["train"], speakers, **mdl_options(config)) if config.mdl else None
    return Fit(model, x, predictions, scores, code)


def mdl_options(config) -> dict:
    """The logistic online code's options: the guarded mixture over :data:`probing.mdl.DEFAULT_C_GRID`,
    or (``mdl_guard`` false) every block at the run's fixed ``c``."""
    options = {"seed": config.seed, "max_iter": config.max_iter, "device": config.device, "order": config.mdl_order}
    return options | ({"c_grid": DEFAULT_C_GRID} if config.mdl_guard else {"c_grid": None, "c": config.c})


def lengths(reader, site: str, ids: list[str]) -> dict:
    """The row's ``mean_test_length``, and ``stored_positions`` where stored frames differ from speech frames."""
    mean_test_length, stored_positions = features.mean_lengths(reader, site, ids)
    return {"mean_test_length": mean_test_length, **({"stored_positions": stored_positions} if stored_positions != mean_test_length else {})}


def row(scores: dict, span: slice, extra: dict, arrays: dict, code: OnlineCode | None, class_names: tuple[str, str]):
    """A logistic runner's (scores, arrays, attention): the row's scores over ``span`` with ``extra``,
    the ``test_*`` scores per position with ``arrays``, and the MDL summary and arrays where there is a code."""
    arrays = {f"test_{k}": np.asarray(v) for k, v in scores.items()} | arrays
    if code is not None:
        arrays |= {"mdl_online_bits": code.online_bits, "mdl_uniform_bits": code.uniform_bits, "mdl_c": code.chosen}
        extra = extra | code.summary(span, MIXTURE_GUARD if code.grid else UNGUARDED)
    return metrics.span_summary(scores, span, class_names) | extra, arrays, {}
