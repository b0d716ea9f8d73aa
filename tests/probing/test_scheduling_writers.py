"""Several submitit local workers appending to one results file while it is being merged lose no row
and interleave none. Kept apart from test_scheduling.py so that the worker processes, which import
this module, load neither torch nor Lightning."""

import json
import time
from pathlib import Path

from probing.results import append_lines, merge_task_results, task_results_file


def append_rows(path: str, worker: int, count: int) -> int:
    for number in range(count):
        append_lines(Path(path), [json.dumps({"run_id": f"{worker}-{number}", "payload": "x" * (number % 7) * 1000})])
    return count


def test_concurrent_local_workers_and_a_merge_lose_no_row(tmp_path):
    import submitit

    out = tmp_path / "rows.jsonl"
    shared = task_results_file(out, 0)
    executor = submitit.AutoExecutor(folder=tmp_path / "logs", cluster="local")
    executor.update_parameters(timeout_min=5, cpus_per_task=1)
    with executor.batch():
        jobs = [executor.submit(append_rows, str(shared), worker, 150) for worker in range(3)]
    merged = 0
    while not all(job.done() for job in jobs):
        merged += merge_task_results(out)
        time.sleep(0.02)
    assert [job.result() for job in jobs] == [150] * 3
    merged += merge_task_results(out, remove_folder=True)
    lines = out.read_text().splitlines()
    assert merged == len(lines) == 450 and len({json.loads(line)["run_id"] for line in lines}) == 450
    assert not shared.parent.exists()
