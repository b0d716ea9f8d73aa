"""A store read as an activation cache (extract.activations): every speech frame once per pass, in
batches of the asked size, repeatable, padding left out, and good enough to train a sparse autoencoder."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from extract.activations import ActivationBatches
from extract.store import ShardReader, StoreError
from tests.paths import CHECKOUT
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("store"), speakers_per_gender=3, utterances_per_speaker=4, dim=6)


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("padded"), speakers_per_gender=3, utterances_per_speaker=4, dim=6, pad_to=40)


def _speech_rows(path) -> np.ndarray:
    reader = ShardReader(path)
    lengths = reader.speech_lengths(SITE)
    return np.concatenate([reader.get(SITE, utterance)[:length] for utterance, length in zip(reader.ids, lengths)])


def _sorted_rows(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])]


def test_one_pass_gives_every_speech_frame_once_in_whole_batches(store):
    batches = ActivationBatches(store, SITE, batch_size=32, buffer_frames=100, drop_last=False)
    got = list(batches)
    assert [len(batch) for batch in got[:-1]] == [32] * (len(got) - 1) and 0 < len(got[-1]) <= 32
    assert len(got) == batches.batches_per_epoch and all(batch.shape[1] == 6 and batch.dtype == torch.float32 for batch in got)
    expected = _speech_rows(store)
    assert batches.frames == len(expected)
    np.testing.assert_array_equal(_sorted_rows(torch.cat(got).numpy()), _sorted_rows(expected))


def test_rows_are_mixed_across_utterances_and_the_order_is_repeatable(store):
    first = torch.cat(list(ActivationBatches(store, SITE, batch_size=16, seed=3)))
    again = torch.cat(list(ActivationBatches(store, SITE, batch_size=16, seed=3)))
    other = torch.cat(list(ActivationBatches(store, SITE, batch_size=16, seed=4)))
    in_order = torch.cat(list(ActivationBatches(store, SITE, batch_size=16, shuffle=False)))
    assert torch.equal(first, again) and not torch.equal(first, other)
    np.testing.assert_array_equal(in_order.numpy(), _speech_rows(store)[: len(in_order)])  # unshuffled: the store's order
    assert not torch.equal(first, in_order)


def test_drop_last_leaves_out_the_smaller_batch_and_passes_differ(store):
    batches = ActivationBatches(store, SITE, batch_size=50, epochs=2)
    got = list(batches)
    assert len(got) == 2 * batches.batches_per_epoch == 2 * (batches.frames // 50)
    assert all(len(batch) == 50 for batch in got)
    half = len(got) // 2
    assert not torch.equal(torch.cat(got[:half]), torch.cat(got[half:]))


def test_without_end_it_keeps_giving_batches(store):
    batches = iter(ActivationBatches(store, SITE, batch_size=64, epochs=None))
    assert len([next(batches) for _ in range(3 * 20)]) == 60


def test_padding_a_store_kept_is_left_out(padded):
    batches = ActivationBatches(padded, SITE, batch_size=8, drop_last=False)
    reader = ShardReader(padded)
    assert batches.frames == int(reader.speech_lengths(SITE).sum()) < int(reader.stored_lengths(SITE).sum())
    np.testing.assert_array_equal(_sorted_rows(torch.cat(list(batches)).numpy()), _sorted_rows(_speech_rows(padded)))


def test_ids_choose_the_utterances(store):
    reader = ShardReader(store)
    train = [utterance for utterance, split in zip(reader.ids, reader.metadata()["split"]) if split == "train"]
    batches = ActivationBatches(reader, SITE, batch_size=4, ids=train, drop_last=False)
    assert batches.frames == int(reader.speech_lengths(SITE, train).sum()) < int(reader.speech_lengths(SITE).sum())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"site": "encoder.layer.9"}, "not a site of this store"),
        ({"batch_size": 0}, "each must be a whole number, at least 1"),
        ({"epochs": 0}, "epochs 0"),
        ({"ids": ["nobody"]}, "not in the store, e.g. 'nobody'"),
        ({"batch_size": 10**6}, "fewer than one batch of 1000000"),
        ({"batch_size": 2.5}, "each must be a whole number"),
        ({"ids": []}, "ids is empty"),
        ({"ids": "female-0-0"}, "give a list of utterance ids, not one string"),
        ({"ids": ["female-0-0", "male-0-0", "female-0-0"]}, "names 'female-0-0' more than once"),
    ],
)
def test_bad_requests_are_refused_in_one_line(store, kwargs, message):
    arguments = {"site": SITE, "batch_size": 16} | kwargs
    with pytest.raises((StoreError, ValueError), match=message):
        ActivationBatches(store, **arguments)


def test_a_tiny_sparse_autoencoder_learns_from_the_batches(store):
    """The loop of any SAE trainer (dictionary_learning's trainSAE iterates the same [batch, D]
    tensors): reconstruction plus an L1 penalty on the codes. A few steps cut the loss."""
    torch.manual_seed(0)
    batches = ActivationBatches(store, SITE, batch_size=64, epochs=None, seed=1)
    encoder, decoder = torch.nn.Linear(6, 24), torch.nn.Linear(24, 6)
    optimiser = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
    losses = []
    for step, activations in enumerate(batches):
        codes = torch.relu(encoder(activations))
        loss = (decoder(codes) - activations).pow(2).sum(dim=1).mean() + 1e-3 * codes.abs().sum(dim=1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        if step == 199:
            break
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])


def test_the_docs_example_runs_as_written(tmp_path, capsys):
    store = write_store(tmp_path / "store", speakers_per_gender=5, utterances_per_speaker=4, dim=6, site="encoder.layer.3")
    text = (CHECKOUT / "docs" / "activations.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    exec(compile(code, "docs/activations.md", "exec"), {"store": store})  # noqa: S102 (the page's own example)
    sizes, loss = capsys.readouterr().out.splitlines()
    dim, frames, per_epoch = map(int, sizes.split())
    assert dim == 6 and frames > 256 and per_epoch == frames // 256
    assert re.fullmatch(r"loss \d+\.\d{3}", loss)
