"""Training with Lightning: one LightningModule per regimen, any probe module inside.

- :class:`LogisticSystem`: L2-regularised logistic probes (per position, or pooled), full batch,
  L-BFGS, the same objective as scikit-learn's ``LogisticRegression(C=1)`` per position: the form
  for a GPU, where all positions run as one large matrix product. On the CPU the same objective is
  solved in cache-sized chunks of positions with warm starts (:mod:`probing.solver`), which is faster
  there than both this joint fit and a loop of scikit-learn fits;
- :class:`AttentionSystem`: the attention probe, Adam lr 1e-4, batch 32, ReduceLROnPlateau(0.5, 3)
  and early stopping (min_delta 1e-5, patience 20) on dev loss, best weights restored.
"""

from __future__ import annotations

import copy
import logging
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler

from probing.lightning_import import L
from probing.modules import AttentionProbe, PositionalLogistic

LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric")


@contextmanager
def quiet_lightning():
    """Lightning's per-fit banners and two warnings that do not apply to probes (full-batch loaders
    need no workers; a torch-internal deprecation), silenced for one fit only: importing this module
    changes no process-wide setting."""
    levels = {name: logging.getLogger(name).level for name in LIGHTNING_LOGGERS}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        warnings.filterwarnings("ignore", message=r".*does not have many workers", category=UserWarning)
        for name in LIGHTNING_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


def _trainer(device: str, max_epochs: int, callbacks=(), seed: int = 0) -> L.Trainer:
    L.seed_everything(seed, workers=True, verbose=False)
    return L.Trainer(
        accelerator="gpu" if device.startswith("cuda") else "cpu",
        devices=1,
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        num_sanity_val_steps=0,
        deterministic=False,
    )


class LogisticSystem(L.LightningModule):
    """Sum over heads and positions of ``sum_i logloss + ||w||^2 / (2C)``, divided by N: each
    (head, position) keeps scikit-learn's objective, and the sum leaves them independent."""

    def __init__(self, positions: int, dim: int, heads: int = 1, c: float = 1.0, max_iter: int = 1000):
        super().__init__()
        self.save_hyperparameters()
        self.probe = PositionalLogistic(positions, dim, heads)

    def training_step(self, batch, batch_index):
        x, y, mask = batch  # position-major: [P, N, D], [N, H], [P, N, H]
        logits = self.probe.position_major(x)
        targets = y[None].expand_as(logits).to(logits.dtype)
        data = (F.binary_cross_entropy_with_logits(logits, targets, reduction="none") * mask).sum()
        penalty = 0.5 / self.hparams.c * self.probe.weight.pow(2).sum()
        return (data + penalty) / x.shape[1]

    def configure_optimizers(self):
        return torch.optim.LBFGS(
            self.parameters(),
            lr=1.0,
            max_iter=self.hparams.max_iter,
            history_size=20,
            tolerance_grad=1e-6,
            tolerance_change=1e-10,
            line_search_fn="strong_wolfe",
        )


@dataclass
class FittedLogistic:
    weight: torch.Tensor  # [P, D]
    bias: torch.Tensor  # [P]

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """P(class 1) for ``x [N, P, D]``: ``[N, P]``."""
        with torch.inference_mode():
            by_position = torch.as_tensor(x, dtype=torch.float32).permute(1, 2, 0)  # [P, D, N], a view
            logits = torch.bmm(self.weight.unsqueeze(1), by_position).squeeze(1).T + self.bias  # einsum takes a path ten times slower
        return torch.sigmoid(logits).numpy()


def fit_logistic_heads(
    x: np.ndarray, y: np.ndarray, mask: np.ndarray, c: float = 1.0, max_iter: int = 1000, device: str = "cpu", seed: int = 0
) -> list[FittedLogistic]:
    """Independent L2 logistic regressions per head and position, in one optimisation.

    ``x [N, P, D]``; ``y [H, N]`` labels per head; ``mask [H, N, P]`` which (example, position)
    pairs each head trains on (padding, or examples outside an MDL block's training prefix).
    """
    system = LogisticSystem(x.shape[1], x.shape[2], heads=y.shape[0], c=c, max_iter=max_iter)
    whole = (
        torch.from_numpy(np.ascontiguousarray(np.swapaxes(x, 0, 1), dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(np.asarray(y).T, dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(np.transpose(mask, (2, 1, 0)), dtype=np.float32)),
    )
    with quiet_lightning():  # one batch, the whole training set: full-batch L-BFGS
        _trainer(device, max_epochs=1, seed=seed).fit(system, DataLoader([whole], batch_size=None))
    weight, bias = system.probe.weight.detach().cpu(), system.probe.bias.detach().cpu()
    return [FittedLogistic(weight[h], bias[h]) for h in range(y.shape[0])]


def fit_logistic(x: np.ndarray, y: np.ndarray, mask: np.ndarray, c: float = 1.0, max_iter: int = 1000, device: str = "cpu", seed: int = 0) -> FittedLogistic:
    """L2 logistic regression per position: ``x [N, P, D]``, ``y [N]``, ``mask [N, P]`` (valid positions); on
    the CPU by :func:`probing.solver.fit_positions` (deterministic: ``seed`` changes nothing)."""
    if device == "cpu":
        from probing.solver import fit_positions

        solution = fit_positions(x, y, mask, c=c, max_iter=max_iter)
        return FittedLogistic(torch.from_numpy(solution.weight), torch.from_numpy(solution.bias))
    return fit_logistic_heads(x, y[None], mask[None], c=c, max_iter=max_iter, device=device, seed=seed)[0]


def fit_multinomial(x: np.ndarray, y: np.ndarray, c: float = 1.0, max_iter: int = 1000):
    """L2 multinomial logistic regression (three classes or more): scikit-learn's ``LogisticRegression(C=c)``,
    the binary probes' objective over K classes (softmax), deterministic; its ``predict`` gives class numbers."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=max_iter).fit(np.asarray(x, dtype=np.float64), np.asarray(y))


class SequenceDataset(Dataset):
    def __init__(self, sequences: list[np.ndarray], labels: np.ndarray):
        self.sequences, self.labels = sequences, labels

    def __len__(self):
        return len(self.sequences)

    def __getitem__(self, index):
        return self.sequences[index], int(self.labels[index])


class StoreSequenceDataset(Dataset):
    """Each utterance's speech frames read from the store when a batch asks for them (standardized
    with ``scaler`` when given), so that no process holds every sequence: DataLoader workers each
    open the store themselves (``ShardReader`` reopens its files in a new process)."""

    def __init__(self, reader, site: str, ids: list[str], labels: np.ndarray, scaler=None):
        self.reader, self.site, self.ids, self.labels, self.scaler = reader, site, list(ids), np.asarray(labels), scaler
        self.lengths = reader.speech_lengths(site, self.ids)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        states = self.reader.get(self.site, self.ids[index])[: int(self.lengths[index])]
        return (self.scaler(states) if self.scaler is not None else states), int(self.labels[index])


def sequence_loader(data: Dataset, batch_size: int, workers: int = 0, shuffle: bool = False, generator=None) -> DataLoader:
    """Batches of (x, lengths, labels). The shuffling sampler owns ``generator``: a DataLoader also draws
    worker seeds from its own generator, once per epoch without workers but once per run with
    persistent ones, which would make the order (and the probe) depend on the number of workers."""
    sampler = RandomSampler(data, generator=generator) if shuffle else None
    return DataLoader(data, batch_size=batch_size, sampler=sampler, collate_fn=collate_sequences, num_workers=workers, persistent_workers=workers > 0)


def collate_sequences(items):
    width = max(len(seq) for seq, _ in items)
    x = torch.zeros(len(items), width, items[0][0].shape[1])
    for row, (seq, _) in enumerate(items):
        x[row, : len(seq)] = torch.as_tensor(seq)
    lengths = torch.tensor([len(seq) for seq, _ in items])
    return x, lengths, torch.tensor([label for _, label in items])


class AttentionSystem(L.LightningModule):
    def __init__(self, dim: int, lr: float = 1e-4, classes: int = 2):  # Fucci et al. 2025: Adam at 1e-4
        super().__init__()
        self.save_hyperparameters()
        self.probe = AttentionProbe(dim, classes)

    def _loss(self, batch):
        x, lengths, y = batch
        logits, _ = self.probe(x, lengths)
        return F.cross_entropy(logits, y)

    def training_step(self, batch, batch_index):
        loss = self._loss(batch)
        self.log("train_loss", loss, on_epoch=True, on_step=False, batch_size=len(batch[2]))
        return loss

    def validation_step(self, batch, batch_index):
        self.log("val_loss", self._loss(batch), on_epoch=True, batch_size=len(batch[2]))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=3)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"}}


class KeepBest(L.Callback):
    """Keeps the weights with the lowest dev loss in memory and restores them when training ends."""

    def __init__(self):
        self.best, self.state, self.epoch = float("inf"), None, -1

    def on_validation_epoch_end(self, trainer, module):
        loss = float(trainer.callback_metrics["val_loss"])
        if loss < self.best:
            self.best, self.state, self.epoch = loss, copy.deepcopy(module.state_dict()), trainer.current_epoch

    def on_fit_end(self, trainer, module):
        if self.state is not None:
            module.load_state_dict(self.state)


@dataclass
class FittedAttention:
    probe: AttentionProbe
    best_epoch: int
    epochs: int

    def predict(self, sequences, batch_size: int = 64, workers: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
        """Class-1 probabilities ``[N]`` and each utterance's attention weights over its valid frames,
        for a list of ``[T, D]`` arrays or a ``Dataset`` of (sequence, label) read in batches."""
        probabilities, weights = self.class_probabilities(sequences, batch_size, workers)
        return probabilities[:, 1], weights

    def class_probabilities(self, sequences, batch_size: int = 64, workers: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`predict` with every class's probability, ``[N, K]`` (the softmax over the probe's K logits)."""
        data = sequences if isinstance(sequences, Dataset) else SequenceDataset(sequences, np.zeros(len(sequences), dtype=int))
        probabilities, weights = [], []
        self.probe.eval()
        with torch.inference_mode():
            for x, lengths, _ in sequence_loader(data, batch_size, workers):
                logits, attention = self.probe(x, lengths)
                probabilities.append(torch.softmax(logits, -1).numpy())
                weights.extend(a[:n].numpy() for a, n in zip(attention, lengths.tolist()))
        return np.concatenate(probabilities), weights


def fit_attention(
    train,
    dev,
    dim: int,
    max_epochs: int = 200,
    device: str = "cpu",
    seed: int = 0,
    batch_size: int = 32,
    lr: float = 1e-4,
    workers: int = 0,
    classes: int = 2,
) -> FittedAttention:
    """``train``/``dev``: (sequences, labels) in memory, or a ``Dataset`` of (sequence, label) such as
    :class:`StoreSequenceDataset`, read in batches by ``workers`` DataLoader processes (0: the main
    process); labels are class numbers ``0 .. classes - 1`` (a K-class softmax head, cross-entropy
    over K). Early stopping needs a non-empty dev set."""
    train, dev = (data if isinstance(data, Dataset) else SequenceDataset(*data) for data in (train, dev))
    if not len(dev):
        raise ValueError("the attention probe needs a dev split for early stopping")
    L.seed_everything(seed, verbose=False)
    system = AttentionSystem(dim, lr=lr, classes=classes)
    keep = KeepBest()
    stop = L.pytorch.callbacks.EarlyStopping(monitor="val_loss", min_delta=1e-5, patience=20, mode="min")
    generator = torch.Generator().manual_seed(seed)
    train_loader = sequence_loader(train, batch_size, workers, shuffle=True, generator=generator)
    dev_loader = sequence_loader(dev, batch_size, workers)
    with quiet_lightning():
        trainer = _trainer(device, max_epochs, callbacks=[keep, stop], seed=seed)
        trainer.fit(system, train_loader, dev_loader)
    return FittedAttention(system.probe.cpu(), keep.epoch, trainer.current_epoch)
