"""Speaker ids by clustering embeddings (Attanasio et al. 2024, §3 and appendix A.4): Fleurs has no speaker ids.

The paper encodes each record with SpeechBrain's ECAPA-TDNN speaker-verification model
(``speechbrain/spkrec-ecapa-voxceleb``), clusters the embeddings separately per gender with
scikit-learn's HDBSCAN (``min_cluster_size=2``, cosine), and gives each cluster an id. Here the
embeddings come from a pluggable source (:func:`parse_source`):

- ``speechbrain:HUB_ID``: a SpeechBrain speaker-verification model (needs ``speechbrain``, not a
  dependency of this package, and the model from the hub);
- ``store:PATH`` or ``store:PATH@SITE``: the mean over speech frames of a store written by
  ``experiments.extract`` (``probing.features.pooled``; default site: the store's last), offline;
- ``mfcc``: the mean and standard deviation over frames of Praat's 12 MFCCs and c0 (26 numbers), offline;
- ``resemblyzer``: the GE2E speaker encoder of Resemblyzer 0.1.4 (Apache-2.0; 256 numbers, L2-normed;
  its weights ship inside the wheel, so it runs offline: the ``speakers`` extra), after its own
  preprocessing (volume normalised to -30 dBFS, silences longer than its VAD's limit cut with
  webrtcvad). A record in which webrtcvad finds no speech is embedded untrimmed, and counted.

Clustering runs per scope: (dataset, language, gender) by default, as the paper, or (dataset,
language) with ``per_gender=False``. HDBSCAN's noise points are not dropped: each gets its own
singleton id. Ids read ``{scope}-spk{k:03d}`` for cluster k and ``{scope}-noise{i:03d}`` for noise.
Against known speakers (the manifest's, unless a record says ``extra.speaker_ids_known: false``, as
Fleurs records do), :func:`agreement` gives the adjusted Rand index and the purity (each cluster's
most common true speaker, summed over clusters, over the records; noise singletons count as clusters).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from extract.audio import SAMPLE_RATE, AudioError, asr_samples
from extract.errors import UserError
from extract.options import option

MFCC_COEFFICIENTS = 12


class SpeakerError(UserError, ValueError):
    """A source that cannot be read or loaded, or embeddings that do not fit the manifest."""


@dataclass(frozen=True)
class Source:
    kind: str
    location: str = ""
    site: str | None = None

    def describe(self) -> str:
        if self.kind == "store":
            return f"store {self.location} at {self.site or 'its last site'} (mean over speech frames)"
        if self.kind == "resemblyzer":
            return f"Resemblyzer {_installed_version('resemblyzer')} GE2E voice encoder (256-d)"
        return f"SpeechBrain {self.location}" if self.kind == "speechbrain" else "MFCC statistics (Praat, 12 + c0, mean and sd)"


def _installed_version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "(not installed)"


def parse_source(text: str) -> Source:
    kind, _, rest = text.partition(":")
    if kind in ("mfcc", "resemblyzer") and not rest:
        return Source(kind)
    if kind == "speechbrain" and rest:
        return Source("speechbrain", rest)
    if kind == "store" and rest:
        path, _, site = rest.partition("@")
        return Source("store", path, site or None)
    raise SpeakerError(f"embedding source {text!r}: expected speechbrain:HUB_ID, store:PATH[@SITE], mfcc or resemblyzer")


@dataclass(frozen=True)
class HdbscanSettings:
    """HDBSCAN's settings (the options of ``speech-gender speakers``, declared once: ``experiments.options``)."""

    min_cluster_size: int = option(2, "HDBSCAN min_cluster_size (2: the paper's)")
    min_samples: int | None = option(None, "HDBSCAN min_samples (default: min_cluster_size)")
    metric: str = option("cosine", "HDBSCAN metric (cosine: the paper's)")
    cluster_selection_epsilon: float = option(0.0, "HDBSCAN cluster_selection_epsilon", flag="--epsilon")
    cluster_selection_method: str = option("eom", "HDBSCAN cluster_selection_method", flag="--selection", choices=("eom", "leaf"))
    standardize: bool = option(False, "z-score each embedding dimension within a scope before clustering")


def mfcc_statistics(samples: np.ndarray) -> np.ndarray:
    """Mean and standard deviation over frames of Praat's MFCCs (c0 and 12 coefficients)."""
    import parselmouth

    mfcc = parselmouth.Sound(samples.astype(np.float64), sampling_frequency=SAMPLE_RATE).to_mfcc(number_of_coefficients=MFCC_COEFFICIENTS)
    frames = mfcc.to_array()  # [13, T]
    return np.concatenate([frames.mean(axis=1), frames.std(axis=1)]).astype(np.float32)


def audio_embeddings(utterances: Sequence, embed, show_progress: bool = True, seconds: list[float] | None = None) -> np.ndarray:
    """``embed(samples)`` for each record's first 30 s; unreadable audio is an error naming the file.
    ``seconds``, when given, receives each record's duration as read."""
    from tqdm.auto import tqdm

    rows = []
    for utterance in tqdm(utterances, desc="embeddings", unit="rec", disable=not show_progress):
        try:
            samples = asr_samples(utterance)
        except AudioError as error:
            raise SpeakerError(f"{utterance.id}: {error}; drop the record from the manifest (experiments.vad_filter lists unreadable ones)") from None
        rows.append(embed(samples))
        if seconds is not None:
            seconds.append(len(samples) / SAMPLE_RATE)
    return np.stack(rows)


def speechbrain_encoder(hub_id: str, device: str = "cpu"):
    """``samples -> embedding`` of a SpeechBrain speaker-verification model (downloaded from the hub)."""
    import importlib.util

    if importlib.util.find_spec("speechbrain") is None:
        raise SpeakerError("speechbrain is not installed: `pip install speechbrain` for speechbrain:HUB_ID, or use store:PATH or mfcc")
    import torch

    try:
        from speechbrain.inference.speaker import EncoderClassifier
    except ImportError:  # speechbrain before 1.0
        from speechbrain.pretrained import EncoderClassifier

    classifier = EncoderClassifier.from_hparams(source=hub_id, run_opts={"device": device})

    def embed(samples: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return classifier.encode_batch(torch.from_numpy(samples)[None]).reshape(-1).float().cpu().numpy()

    return embed


class ResemblyzerEncoder:
    """``samples -> embedding`` (256-d, L2-normed) of Resemblyzer's GE2E voice encoder, loaded once.

    ``untrimmed`` lists the calls (in order: the records' positions) whose audio webrtcvad found no
    speech in; they are embedded without trimming rather than from nothing (an empty input gives a
    meaningless embedding)."""

    MIN_TRIMMED_SECONDS = 0.1

    def __init__(self, device: str = "cpu"):
        import importlib.util
        import warnings

        if importlib.util.find_spec("resemblyzer") is None:
            raise SpeakerError(
                "resemblyzer is not installed: `pip install 'speech-gender-probing[speakers]'` (resemblyzer 0.1.4) for --embeddings resemblyzer, "
                "or use store:PATH or mfcc"
            )
        with warnings.catch_warnings():  # resemblyzer 0.1.4 imports deprecated APIs (pkg_resources through webrtcvad, scipy.ndimage.morphology)
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated as an API", category=UserWarning)
            warnings.filterwarnings("ignore", message=".*scipy.ndimage.morphology.* is deprecated", category=DeprecationWarning)
            try:
                from resemblyzer import VoiceEncoder, audio, hparams
            except ImportError as error:  # installed, but what it imports is not (webrtcvad needs pkg_resources, gone from setuptools 81 on)
                raise SpeakerError(
                    f"resemblyzer is installed but cannot be imported ({type(error).__name__}: {error}); install what it names "
                    "(pkg_resources: setuptools < 81), or use store:PATH or mfcc"
                ) from None

        if hparams.sampling_rate != SAMPLE_RATE:
            raise SpeakerError(f"resemblyzer expects {hparams.sampling_rate} Hz audio, and audio is read at {SAMPLE_RATE} Hz")
        self.audio, self.hparams = audio, hparams
        self.encoder = VoiceEncoder(device, verbose=False)
        self.calls = 0
        self.untrimmed: list[int] = []

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        wav = self.audio.normalize_volume(samples.astype(np.float32), self.hparams.audio_norm_target_dBFS, increase_only=True)
        trimmed = self.audio.trim_long_silences(wav)
        if len(trimmed) < self.MIN_TRIMMED_SECONDS * SAMPLE_RATE:
            self.untrimmed.append(self.calls)
            trimmed = wav
        self.calls += 1
        return self.encoder.embed_utterance(trimmed).astype(np.float32)


def store_embeddings(path: str, site: str | None, ids: Sequence[str]) -> tuple[np.ndarray, str]:
    """(mean-pooled speech frames ``[N, D]`` of ``ids``, the site read) from a store."""
    from extract.store import ShardReader, StoreError
    from probing.features import pooled

    try:
        reader = ShardReader(path)
    except StoreError as error:
        raise SpeakerError(str(error)) from None
    site = site or reader.sites[-1]
    if site not in reader.sites:
        raise SpeakerError(f"{path}: no site {site!r}; it has {', '.join(reader.sites)}")
    stored = set(reader.ids)
    missing = [i for i in ids if i not in stored]
    if missing:
        raise SpeakerError(f"{path}: {len(missing)} record(s) of the manifest are not in the store, e.g. {missing[:3]}")
    try:
        return pooled(reader, site, list(ids), "mean")[:, 0], site
    finally:
        reader.close()


def cluster(embeddings: np.ndarray, settings: HdbscanSettings) -> np.ndarray:
    """HDBSCAN labels (-1: noise); fewer records than ``min_cluster_size`` are all noise."""
    from sklearn.cluster import HDBSCAN

    x = np.asarray(embeddings, dtype=np.float64)
    if len(x) < max(2, settings.min_cluster_size):
        return np.full(len(x), -1)
    if settings.standardize:
        scale = x.std(axis=0)
        x = (x - x.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    hdbscan_parameters = {name: value for name, value in asdict(settings).items() if name != "standardize"}  # the rest are HDBSCAN's, by name
    return HDBSCAN(**hdbscan_parameters, copy=True).fit(x).labels_


def scope_of(utterance, per_gender: bool) -> str:
    parts = [utterance.dataset or "nodataset", utterance.language] + ([utterance.gender] if per_gender else [])
    return "-".join(parts)


def check_spread(scope: str, ids: Sequence[str], embeddings: np.ndarray) -> None:
    """Refuses a scope of two or more records whose embeddings are all identical: HDBSCAN has nothing to
    separate there and makes every record a noise singleton, i.e. each its own speaker, which is
    what records reading one audio file (a manifest whose paths all point at one WAV) would give."""
    if len(embeddings) > 1 and (embeddings == embeddings[0]).all():
        raise SpeakerError(
            f"{scope}: the {len(ids)} records have identical embeddings (no spread: the same audio?), e.g. {', '.join(ids[:3])}; "
            "clustering them would make each record its own speaker"
        )


def assign_speakers(utterances: Sequence, embeddings: np.ndarray, settings: HdbscanSettings, per_gender: bool = True) -> list[dict]:
    """Per record, in order: ``{"speaker", "scope", "cluster", "noise"}``; a scope without spread is
    refused (:func:`check_spread`)."""
    scopes: dict[str, list[int]] = {}
    for index, utterance in enumerate(utterances):
        scopes.setdefault(scope_of(utterance, per_gender), []).append(index)
    assigned: list[dict] = [{}] * len(utterances)
    for scope, indices in scopes.items():
        check_spread(scope, [utterances[i].id for i in indices], embeddings[indices])
        labels = cluster(embeddings[indices], settings)
        noise = 0
        for index, label in zip(indices, labels):
            if label >= 0:
                speaker = f"{scope}-spk{int(label):03d}"
            else:
                speaker, noise = f"{scope}-noise{noise:03d}", noise + 1
            assigned[index] = {"speaker": speaker, "scope": scope, "cluster": int(label), "noise": bool(label < 0)}
    return assigned


def purity(true: Sequence[str], predicted: Sequence[str]) -> float:
    """Share of records whose cluster's most common true speaker is their own."""
    by_cluster: dict[str, Counter] = {}
    for t, p in zip(true, predicted):
        by_cluster.setdefault(p, Counter())[t] += 1
    return sum(counter.most_common(1)[0][1] for counter in by_cluster.values()) / len(true)


def agreement(true: Sequence[str], predicted: Sequence[str]) -> dict:
    """ARI, purity and inverse purity (each true speaker's most common cluster) of the clustering."""
    from sklearn.metrics import adjusted_rand_score

    return {
        "records": len(true),
        "true_speakers": len(set(true)),
        "clusters": len(set(predicted)),
        "adjusted_rand_index": float(adjusted_rand_score(true, predicted)),
        "purity": purity(true, predicted),
        "inverse_purity": purity(predicted, true),
    }


def known_speakers(utterances: Sequence) -> list[int]:
    """Indices of records whose manifest speaker is a real speaker id (not Fleurs' per-recording one)."""
    return [i for i, u in enumerate(utterances) if u.extra.get("speaker_ids_known", True) is not False]


def clustering_record(source: Source, site: str | None, settings: HdbscanSettings, per_gender: bool) -> dict:
    return {"source": source.describe(), "site": site, "hdbscan": asdict(settings), "scope": "dataset, language, gender" if per_gender else "dataset, language"}
