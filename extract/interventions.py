"""Interventions inside a model: a fitted eraser or steering vector as a file, and the forward hook
that applies it at its site while the model runs (extraction or generation).

A file (safetensors: tensors plus one JSON record in the header metadata, no pickle) holds

- ``kind``: ``erase`` (LEACE fitted on gender), ``random-erase`` (the same fit on a random concept,
  the control) or ``steer`` (h + alpha * direction, toward ``target``);
- the tensors: ``proj_left`` [D, r], ``proj_right`` [r, D] and ``bias`` [D] of an eraser
  (h - ((h - bias) proj_right^T) proj_left^T, LEACE's closed form), or ``direction`` [D];
- ``site`` and the model it was fitted on (:func:`store_model_identity`: family, checkpoint, the
  model's fingerprint, revision, random init and seed, site module, hidden size, as the store
  recorded them), the store itself (path and :func:`store_content_hash`) and how it was fitted
  (``fit``, whose ``method`` names the kind: :data:`METHODS`);
- ``digest``: a sha256 over the rest of the record and the tensors' bytes (:func:`record_digest`),
  checked on load, so that a record relabelled by hand (another site, another model) or a tensor
  changed by a byte is refused rather than applied.

:class:`Intervener` installs a list of them on a loaded extractor; the runner announces each batch
(:meth:`Intervener.batch`: every row's gender and input samples), so that the hook edits only the
rows of the chosen gender. The hook edits each row's **speech frames only**
(``Extractor.speech_frames``): the erasers are fitted on speech frames (never stored padding), and
Whisper's 1500-frame window is mostly padding it attends to, where an eraser fitted elsewhere would
be an uncontrolled edit. Families that pad a batch to its longest input (SeamlessM4T, S2T, ZeroSwot)
report all frames as speech; their batch padding is masked downstream.

A file whose family, model, revision, random init or site module differ from the loaded model is
refused before anything runs (the model by its fingerprint, see ``extract.fingerprint``, so that
the same checkpoint folder through another path is accepted and its weights changed in place are
not; by the checkpoint's name for a model built in code); one whose hidden size differs from the
site's states is refused at the first forward pass, before any state is changed. An edit that makes
the states non-finite stops the run, naming the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from extract.errors import UserError
from extract.fingerprint import FINGERPRINT  # compared instead of the checkpoint's spelling when the file or the model has one
from extract.provenance import file_sha256

if TYPE_CHECKING:
    import torch

FORMAT = "speech-gender-probing/intervention"
VERSION = 2  # 2: the record carries its digest
METHODS = {"leace": "erase", "random": "random-erase", "mean-diff": "steer"}  # fitting method -> intervention kind
KINDS = tuple(METHODS.values())
GENDERS = ("female", "male")
TENSORS = {"erase": ("proj_left", "proj_right", "bias"), "random-erase": ("proj_left", "proj_right", "bias"), "steer": ("direction",)}
MODEL_KEYS = ("family", "checkpoint", "revision", "random_init", "seed", "site_module")  # compared with the loaded model
RECORD_KEYS = ("kind", "site", "model", "store", "fit", "digest")


class InterventionError(UserError, ValueError):
    """An intervention file that cannot be used as given: malformed, or fitted on another model or site."""


def store_content_hash(path: str | Path) -> str:
    """One sha256 over the complete parts of a store: each part's name and the content checksum its
    writer recorded (``content_sha256``; recomputed from the data for a part written before it existed)."""
    from extract.store import recorded_checksum, store_parts

    digest = hashlib.sha256()
    for part in store_parts(Path(path)):
        digest.update(f"{part.name}\0{recorded_checksum(part, recompute=True)}\n".encode())
    return digest.hexdigest()


def store_model_identity(reader, site: str) -> dict:
    """What a store records about the model behind ``site`` (the fingerprint None for a store written without one)."""
    info = reader.info
    config = info.config
    random_init = bool(config.get("random_init", False))
    return {
        "family": info.family if info.family is not None else str(config.get("model", "")),
        "checkpoint": info.model_id if info.model_id is not None else str(config.get("checkpoint", "")),
        FINGERPRINT: config.get(FINGERPRINT),
        "revision": info.revision or "",
        "random_init": random_init,
        "seed": config.get("seed") if random_init else None,
        "site_module": info.site_module(site),
        "hidden_size": reader.dim(site),
        "frame_rate": (info.frame_rates or {}).get(site),
        "model_dtype": info.model_dtype or "",
    }


def runtime_model_identity(extractor, site: str, random_init: bool = False, seed: int | None = None) -> dict:
    """The same fields for a loaded extractor (:data:`MODEL_KEYS` and its fingerprint; the hidden size is checked on the states)."""
    table = extractor.site_table()
    module = f"{table[site].module or '<model>'}:{table[site].take}" if site in table else ""
    return {
        "family": extractor.family,
        "checkpoint": extractor.checkpoint,
        FINGERPRINT: extractor.fingerprint,
        "revision": extractor.revision or "",
        "random_init": bool(random_init),
        "seed": seed if random_init else None,
        "site_module": module,
    }


@dataclass(frozen=True)
class Intervention:
    """One fitted edit of the states at ``site`` (see the module docstring)."""

    kind: str
    site: str
    model: dict  # store_model_identity of the store it was fitted on
    store: dict  # {"path", "content_sha256"}
    tensors: dict[str, np.ndarray]
    alpha: float | None = None  # steer only
    target: str | None = None  # steer only: the gender the states move toward
    fit: dict = field(default_factory=dict)  # how it was fitted (method, split, frames, variance removed, rank, ...); saved with its method

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InterventionError(f"unknown intervention kind {self.kind!r}; known: {', '.join(KINDS)}")
        names = TENSORS[self.kind]
        if set(self.tensors) != set(names):
            raise InterventionError(f"a {self.kind} intervention holds the tensors {', '.join(names)}, got {', '.join(sorted(self.tensors)) or 'none'}")
        dim = self.dim
        shapes = {"proj_left": (dim, None), "proj_right": (None, dim), "bias": (dim,), "direction": (dim,)}
        for name in names:
            shape = self.tensors[name].shape
            expected = shapes[name]
            if len(shape) != len(expected) or any(e is not None and s != e for s, e in zip(shape, expected)):
                raise InterventionError(f"{self.kind} tensor {name} has shape {shape}, expected {tuple(e if e is not None else 'r' for e in expected)}")
            if not np.isfinite(self.tensors[name]).all():
                raise InterventionError(f"{self.kind} tensor {name} holds NaN or infinity")
        if self.kind != "steer" and self.tensors["proj_left"].shape[1] != self.tensors["proj_right"].shape[0]:
            raise InterventionError("proj_left and proj_right disagree on the rank")
        if self.kind == "steer":
            if self.target not in GENDERS:
                raise InterventionError(f"a steering vector needs a target gender ({' or '.join(GENDERS)}), got {self.target!r}")
            if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not np.isfinite(self.alpha):
                raise InterventionError(f"a steering vector needs a finite alpha (a number), got {self.alpha!r}")
            step = float(np.abs(self.alpha * self.tensors["direction"].astype(np.float64)).max(initial=0.0))
            if step > float(np.finfo(np.float32).max):  # a Python float: numpy 2 would cast step to float32 first
                raise InterventionError(
                    f"alpha {self.alpha:g} times the direction reaches {step:.3g}, beyond float32 (the edit's arithmetic); use a smaller alpha"
                )
        elif self.alpha is not None or self.target is not None:
            raise InterventionError(f"alpha and target are for steering vectors, not {self.kind} (got alpha {self.alpha!r}, target {self.target!r})")

    @property
    def dim(self) -> int:
        return int(self.tensors["direction" if self.kind == "steer" else "bias"].shape[0])

    @property
    def rank(self) -> int:
        return 1 if self.kind == "steer" else int(self.tensors["proj_left"].shape[1])

    def apply(self, states: np.ndarray) -> np.ndarray:
        """The edit on an array ``[..., D]`` (float64 arithmetic; the hook does the same in torch)."""
        operands = {name: np.asarray(value, dtype=np.float64) for name, value in _operands(self).items()}
        return _apply(self, operands, np.asarray(states, dtype=np.float64))

    def header(self) -> dict:
        recorded = ("kind", "site", "model", "store", "alpha", "target", "fit")  # the record's keys besides its format and digest
        return {"format": FORMAT, "version": VERSION} | {key: getattr(self, key) for key in recorded}

    def save(self, path: str | Path) -> Path:
        """The tensors (float32) and the record with its :func:`record_digest`, written to a temporary
        name and renamed. The fit record must name the method of this kind."""
        from safetensors.numpy import save_file

        if not isinstance(self.fit, dict) or METHODS.get(self.fit.get("method")) != self.kind:
            raise InterventionError(f"a {self.kind} intervention is saved with its fitting method ({_method_of(self.kind)}) in its fit record")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in self.tensors.items()}
        header = json.loads(json.dumps(self.header()))
        temporary = path.with_name(f"{path.name}.tmp")
        try:
            save_file(tensors, str(temporary), metadata={"intervention": json.dumps(header | {"digest": record_digest(header, tensors)})})
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return path

    def record(self, path: str | Path, gender: str | None) -> dict:
        """What a store's config and a transcription's settings record about this file in a run (the
        absolute path, so that a rerun from another folder names the same file the same way)."""
        return {
            "path": str(Path(path).resolve()),
            "sha256": file_sha256(path),
            "kind": self.kind,
            "site": self.site,
            "alpha": self.alpha,
            "target": self.target,
            "gender": gender or "all",
        }


def load_intervention(path: str | Path) -> Intervention:
    """A saved intervention, checked (:class:`InterventionError`, one line naming the file, for
    anything malformed: see :func:`check_record`)."""
    from safetensors import SafetensorError, safe_open
    from safetensors.numpy import load_file

    path = Path(path)
    if path.is_dir():
        raise InterventionError(f"{path} is a folder; give an intervention file (python -m experiments.erase fit --out FILE)")
    if not path.is_file():
        raise InterventionError(f"{path}: no such intervention file")
    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise InterventionError(f"{path}: not an intervention file (safetensors could not read it: {error})") from None
    try:
        header = json.loads(metadata["intervention"])
    except (KeyError, ValueError):
        raise InterventionError(f"{path}: a safetensors file without an intervention record; fit one with python -m experiments.erase fit") from None
    try:
        check_record(header)
        intervention = Intervention(
            header["kind"],
            header["site"],
            header["model"],
            header["store"],
            {name: np.asarray(value) for name, value in tensors.items()},
            header.get("alpha"),
            header.get("target"),
            header["fit"],
        )
        if header["digest"] != record_digest(header, tensors):
            raise InterventionError("the record or the tensors changed since the file was fitted (its digest does not match); fit it again")
    except InterventionError as error:
        raise InterventionError(f"{path}: {error}") from None
    return intervention


def check_record(header) -> None:
    """The schema of a file's record (format and version, kind, site, model, store, fit and its
    method; the tensors, alpha and target are checked by :class:`Intervention`), in one line."""
    if not isinstance(header, dict):
        raise InterventionError(f"the intervention record is {type(header).__name__}, not a mapping")
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        found = f"format {header.get('format')!r} version {header.get('version')!r}"
        raise InterventionError(f"{found}, expected {FORMAT!r} version {VERSION}; fit it again with python -m experiments.erase fit")
    missing = [key for key in RECORD_KEYS if key not in header]
    if missing:
        raise InterventionError(f"the intervention record lacks {', '.join(missing)}")
    kind, site = header["kind"], header["site"]
    if kind not in KINDS:
        raise InterventionError(f"unknown intervention kind {kind!r}; known: {', '.join(KINDS)}")
    if not isinstance(site, str) or not site:
        raise InterventionError(f"the record's site must be a site name, got {site!r}")
    for key in ("model", "store", "fit"):
        if not isinstance(header[key], dict):
            raise InterventionError(f"the record's {key} must be a mapping, got {header[key]!r}")
    absent = [key for key in (*MODEL_KEYS, FINGERPRINT) if key not in header["model"]]
    if absent:
        raise InterventionError(f"the record's model lacks {', '.join(absent)}")
    method = header["fit"].get("method")
    if METHODS.get(method) != kind:
        raise InterventionError(f"the record's fitting method {method!r} does not make a {kind} intervention ({_method_of(kind)} does)")


def record_digest(header: dict, tensors: dict[str, np.ndarray]) -> str:
    """sha256 binding a record to its tensors: the record (every key but ``digest``) as canonical
    JSON, then each tensor's name, dtype, shape and bytes, by name."""
    record = {key: value for key, value in header.items() if key != "digest"}
    digest = hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        digest.update(f"\0{name}\0{array.dtype.str}\0{list(array.shape)}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _method_of(kind: str) -> str:
    return next(method for method, made in METHODS.items() if made == kind)


def check_model(intervention: Intervention, extractor, where: str, random_init: bool = False, seed: int | None = None) -> None:
    """Refuse ``intervention`` (loaded from ``where``) unless its site exists in ``extractor``'s site
    table and it was fitted on the same model (:data:`MODEL_KEYS`)."""
    table = extractor.site_table()
    if intervention.site not in table:
        raise InterventionError(f"{where}: fitted at site {intervention.site!r}, which {extractor.family} does not have (valid: {', '.join(table)})")
    site = table[intervention.site]
    if site.select is not None or site.transform is not None:
        raise InterventionError(f"{where}: site {intervention.site} is a derived view of its module's output and cannot be edited; fit at another site")
    loaded = runtime_model_identity(extractor, intervention.site, random_init, seed)
    keys = compared_keys(intervention.model, loaded)
    differing = [f"{key}: file {intervention.model.get(key)!r} vs loaded {loaded[key]!r}" for key in keys if intervention.model.get(key) != loaded[key]]
    if differing:
        raise InterventionError(f"{where} was fitted on another model or site ({'; '.join(differing)}); fit it on a store of this model")


def compared_keys(fitted: dict, loaded: dict) -> tuple[str, ...]:
    """:data:`MODEL_KEYS`, with the model's fingerprint in place of the checkpoint's spelling when
    either side has one (a model built in code has none, and is known by its name)."""
    if fitted.get(FINGERPRINT) is None and loaded.get(FINGERPRINT) is None:
        return MODEL_KEYS
    return tuple(FINGERPRINT if key == "checkpoint" else key for key in MODEL_KEYS)


@dataclass
class _Rows:
    genders: list[str]
    samples: list[int]


class Intervener:
    """Interventions (files, applied in the order given at each site) for a run, on every utterance
    or only on those of ``gender``. Install on an extractor with :meth:`installed`; wrap each
    batch's forward pass (extraction or generation) in :meth:`batch`."""

    def __init__(self, paths: Sequence[str | Path], gender: str | None = None):
        if gender is not None and gender not in GENDERS:
            raise InterventionError(f"intervention gender must be one of {', '.join(GENDERS)} (or all utterances), got {gender!r}")
        if not paths:
            raise InterventionError("no intervention files given")
        self.paths = [Path(p) for p in paths]
        self.gender = gender
        self.interventions = [load_intervention(p) for p in self.paths]
        self._rows: _Rows | None = None
        self._fired: dict[str, int] = {}

    def records(self) -> list[dict]:
        """One record per file (path, sha256, kind, site, alpha, target, gender), for configs and settings."""
        return [intervention.record(path, self.gender) for path, intervention in zip(self.paths, self.interventions)]

    @property
    def sites(self) -> list[str]:
        return list(dict.fromkeys(i.site for i in self.interventions))

    def check(self, extractor, random_init: bool = False, seed: int | None = None) -> None:
        for path, intervention in zip(self.paths, self.interventions):
            check_model(intervention, extractor, str(path), random_init, seed)

    @contextmanager
    def installed(self, extractor, random_init: bool = False, seed: int | None = None) -> Iterator[Intervener]:
        """Checks every file against ``extractor`` and registers one editing hook per site (before any
        reading hook, so that what is captured at the site is the edited state); always removes them."""
        from extract.hooks import edit

        self.check(extractor, random_init, seed)
        table = extractor.site_table()
        edits = {}
        for site in self.sites:
            chosen = [(path, i) for path, i in zip(self.paths, self.interventions) if i.site == site]
            edits[site] = (table[site], self._editor(extractor, site, chosen))
        with edit(extractor.model, edits):
            yield self

    @contextmanager
    def batch(self, genders: Sequence[str], samples: Sequence[int]) -> Iterator[None]:
        """The rows of the next forward pass (their genders and input samples, in batch order); on
        leaving, every site must have been edited (a forward stopped before a site, e.g. an extraction
        of earlier sites only, would otherwise record an intervention that never happened). Non-finite
        states after an edited site name the files too."""
        from extract.families.base import NonFiniteError

        self._rows = _Rows(list(genders), [int(n) for n in samples])
        self._fired = {site: 0 for site in self.sites}
        try:
            yield
            silent = [site for site, count in self._fired.items() if not count]
            if silent:
                raise InterventionError(
                    f"the intervention at {', '.join(silent)} never ran: the forward pass stopped before that site (extract at least one site at or after it)"
                )
        except NonFiniteError as error:
            files = ", ".join(str(path) for path in self.paths)
            raise NonFiniteError(f"{error}, with the states edited by {files} (a steering alpha too large?)") from None
        finally:
            self._rows = None

    def _editor(self, extractor, site: str, chosen: list[tuple[Path, Intervention]]):
        import torch  # here, not at the top: reading and checking an intervention file needs no torch (nor does --help)

        device = extractor.device
        tensors = [{name: torch.as_tensor(value, dtype=torch.float32, device=device) for name, value in _operands(i).items()} for _, i in chosen]

        def edit_states(states: torch.Tensor) -> torch.Tensor:
            rows = self._rows
            if rows is None:
                raise InterventionError(f"the intervention at {site} ran outside a batch announced by the runner")
            if states.ndim != 3 or states.shape[0] != len(rows.genders):
                raise InterventionError(f"site {site}: states of shape {tuple(states.shape)} for a batch of {len(rows.genders)} utterances")
            for path, intervention in chosen:
                if states.shape[-1] != intervention.dim:
                    raise InterventionError(f"{path} was fitted on states of size {intervention.dim}; site {site} of the loaded model has {states.shape[-1]}")
            frames = states.shape[1]
            speech = torch.tensor([extractor.speech_frames(site, n, frames) for n in rows.samples], device=states.device)
            selected = torch.tensor([self.gender is None or g == self.gender for g in rows.genders], device=states.device)
            mask = (torch.arange(frames, device=states.device)[None, :] < speech[:, None]) & selected[:, None]
            edited = states.float()
            for (_, intervention), values in zip(chosen, tensors):
                edited = _apply(intervention, values, edited)
            self._fired[site] += 1
            result = torch.where(mask[..., None], edited.to(states.dtype), states)
            if not bool(torch.isfinite(result).all()) and bool(torch.isfinite(states).all()):
                files = ", ".join(str(path) for path, _ in chosen)
                dtype = str(states.dtype).removeprefix("torch.")
                raise InterventionError(f"{files}: the edit at {site} made the states non-finite in {dtype} (a steering alpha too large?)")
            return result

        return edit_states


def _operands(intervention: Intervention) -> dict[str, np.ndarray]:
    """What the hook computes with: a steering vector's step alpha * direction (in float64, finite in
    float32 by :class:`Intervention`'s check; alpha alone may not be), an eraser's tensors."""
    if intervention.kind == "steer":
        return {"step": intervention.alpha * intervention.tensors["direction"].astype(np.float64)}
    return intervention.tensors


def _apply(intervention: Intervention, values: dict, states: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
    """The edit in torch (the hook) or numpy (:meth:`Intervention.apply`), which share its arithmetic."""
    if intervention.kind == "steer":
        return states + values["step"]
    return states - ((states - values["bias"]) @ values["proj_right"].T) @ values["proj_left"].T
