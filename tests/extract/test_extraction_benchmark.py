"""benchmarks/extraction.py's stage clock: it times every stage of a run and leaves the package as it found it."""

import importlib.util
import subprocess

from extract.families import tiny_extractor
from extract.manifest import read_manifest
from extract.pipeline import BackgroundWriter
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import PartWriter, ShardReader
from tests.paths import CHECKOUT

SPEC = importlib.util.spec_from_file_location("extraction_benchmark", CHECKOUT / "benchmarks" / "extraction.py")
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def test_the_stage_clock_times_each_stage_and_restores_what_it_wrapped(tmp_path):
    import extract.runner

    extractor = tiny_extractor("s2t")
    sites = extractor.resolve_sites("all")
    utterances = read_manifest(bench.synthetic_voices(tmp_path / "audio", 4))
    before = (PartWriter.add, PartWriter.close, BackgroundWriter.submit, extract.runner.prefetched, "extract" in vars(extractor))
    clock = bench.StageClock(extractor)
    with clock:
        run_extraction(extractor, utterances, sites, tmp_path / "store", config={}, show_progress=False, options=ExtractOptions(utterances_per_part=2))
    assert set(clock.seconds) == {"next_batch", "extract", "submit", "add", "close"}
    assert all(seconds >= 0 for seconds in clock.seconds.values()) and clock.seconds["extract"] > 0
    assert (PartWriter.add, PartWriter.close, BackgroundWriter.submit, extract.runner.prefetched, "extract" in vars(extractor)) == before
    assert len(ShardReader(tmp_path / "store")) == 4


def test_the_gpu_check_script_parses():
    assert subprocess.run(["bash", "-n", str(CHECKOUT / "benchmarks" / "gpu_check.sh")]).returncode == 0
