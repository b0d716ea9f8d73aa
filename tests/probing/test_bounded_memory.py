"""Probes in bounded memory: positions read from the store in chunks, streaming statistics, attention
sequences read per batch; results equal to the whole-array path."""

import numpy as np
import pytest

from extract.store import ShardReader
from probing import features
from probing.run import ProbeConfig, run_probe
from probing.solver import SPAN
from tests.synthetic_store import write_store

SITE = "encoder.layer.0"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("bounded") / "s", speakers_per_gender=6, utterances_per_speaker=8, dim=6, length_range=(5, 40))


def test_a_range_of_positions_is_the_slice_of_the_leading_frames(store):
    reader = ShardReader(store)
    ids = reader.ids[::3]
    whole, lengths = reader.leading(SITE, 40, ids)
    for begin, end in ((0, 7), (7, 33), (33, 40), (38, 45)):
        part = reader.frames(SITE, begin, end, ids)
        np.testing.assert_array_equal(part[:, : max(0, min(end, 40) - begin)], whole[:, begin:end])
        assert not part[:, max(0, 40 - begin) :].any()
    short = int(np.argmin(lengths))
    assert not reader.frames(SITE, int(lengths[short]), 40, ids)[short].any()


def test_streaming_statistics_equal_the_two_pass_ones(store):
    reader = ShardReader(store)
    sequences = list(features.speech_states(reader, SITE, reader.ids))
    streamed = features.Standardizer.fit_stream(iter(sequences))
    held = features.Standardizer.fit_sequences(sequences)
    np.testing.assert_allclose(streamed.mean, held.mean, atol=1e-6)
    np.testing.assert_allclose(streamed.scale, held.scale, rtol=1e-5)
    with pytest.raises(ValueError, match="no frames"):
        features.Standardizer.fit_stream([])


def test_positions_per_chunk_by_hand():
    per_position = 3 * 1000 * 256 * 4  # bytes: three copies of N x D float32
    assert features.positions_per_chunk(1.0 + 10 * per_position / 2**30, 1000, 256, 1000) == 10
    assert features.positions_per_chunk(1.0 + 100 * per_position / 2**30, 1000, 256, 1000) == 96  # whole runs of SPAN = 32
    assert features.positions_per_chunk(1.0, 1000, 256, 1000) == 1  # never less than one position
    assert features.positions_per_chunk(64.0, 1000, 256, 50) == 50
    assert SPAN == 32
    assert features.in_memory_bytes(8000, 1000, 1280) / 1e9 == pytest.approx(122.88)
    with pytest.raises(ValueError, match="positive"):
        features.positions_per_chunk(0, 10, 10, 10)


def test_positional_probes_in_chunks_equal_the_single_chunk_run(store):
    base = dict(store=str(store), site=SITE, probe="positional", mdl=True, positions=40)
    whole = run_probe(ProbeConfig(**base))
    chunked = run_probe(ProbeConfig(**base, memory_gb=1.0 + 1e-6))  # one position per chunk
    assert whole.row["run_id"] == chunked.row["run_id"]  # the budget is not part of what a run computes
    assert abs(whole.row["f1_macro"] - chunked.row["f1_macro"]) < 0.5
    # the same problems, solved in batches of other shapes: equal up to the solver's tolerance
    assert chunked.row["codelength_online_bits"] == pytest.approx(whole.row["codelength_online_bits"], rel=0.01)
    np.testing.assert_allclose(chunked.arrays["mdl_online_bits"], whole.arrays["mdl_online_bits"], rtol=0.1)
    np.testing.assert_array_equal(chunked.arrays["test_count"], whole.arrays["test_count"])
    assert chunked.row["positions_used"] == whole.row["positions_used"] == 39
    assert chunked.row["mdl_uniform_blocks"] == whole.row["mdl_uniform_blocks"]


def test_attention_reads_from_the_store_when_sequences_exceed_the_budget(store):
    base = dict(store=str(store), site=SITE, probe="attention", max_epochs=3, lr=1e-2)
    held = run_probe(ProbeConfig(**base))
    streamed = run_probe(ProbeConfig(**base, memory_gb=1.0 + 1e-6))
    assert held.row["run_id"] == streamed.row["run_id"]
    np.testing.assert_allclose(streamed.attention["probabilities"], held.attention["probabilities"], atol=1e-4)
    assert streamed.row["f1_macro"] == pytest.approx(held.row["f1_macro"])
    for a, b in zip(streamed.attention["weights"], held.attention["weights"]):
        np.testing.assert_allclose(a, b, atol=1e-4)
    with_workers = run_probe(ProbeConfig(**base, memory_gb=1.0 + 1e-6, loader_workers=1))
    assert with_workers.row["run_id"] != held.row["run_id"]  # workers change training slightly: a run of its own
    np.testing.assert_allclose(with_workers.attention["probabilities"], held.attention["probabilities"], atol=0.05)


def test_bad_budgets_are_refused():
    from probing.data import ProbeError

    with pytest.raises(ProbeError, match="memory_gb"):
        ProbeConfig(store="s", site=SITE, memory_gb=0)
    with pytest.raises(ProbeError, match="loader_workers"):
        ProbeConfig(store="s", site=SITE, loader_workers=-1)


def test_the_position_major_scratch_file_holds_the_leading_frames(store, tmp_path):
    reader = ShardReader(store)
    ids = reader.ids[:17]
    whole, _ = reader.leading(SITE, 40, ids)
    scratch = features.write_position_major(reader, SITE, ids, 40, tmp_path, block_bytes=5 * 40 * 6 * 4)  # five utterances per block
    try:
        assert (tmp_path / "positions.bin").stat().st_size == 40 * 17 * 6 * 4  # float32 store: float32 scratch
        np.testing.assert_array_equal(scratch.read(0, 40), whole)
        np.testing.assert_array_equal(scratch.read(13, 29), whole[:, 13:29])
    finally:
        scratch.close()
