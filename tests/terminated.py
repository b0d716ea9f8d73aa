"""A command stopped by SIGTERM halfway through its second part: what the tests of a clean stop share."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.paths import CHECKOUT


def hanging_at_third_call(real, started: Path):
    """``real``, but its third call touches ``started`` and hangs: at two utterances a part and one a
    call, part 0 is complete and part 1 half written. For the script :func:`terminate_halfway` runs."""
    calls = []

    def then_hang(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            started.touch()
            time.sleep(600)
        return real(*args, **kwargs)

    return then_hang


def terminate_halfway(script: str, argv: list[str], started: Path, out: Path) -> None:
    """Run ``script`` (``python -c``, given ``started`` then ``argv``) till it touches ``started``,
    send it SIGTERM, and check the stop: the signal's exit status, the complete part 0 left in the
    store ``out``, and no open part nor claim."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(started), *argv], stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(CHECKOUT)}
    )
    deadline = time.time() + 120
    while not started.exists():
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert [p.name for p in out.glob("*.h5")] == ["shard0000of0001-part00000.h5"]
    assert not list(out.glob("*.tmp")) and not list(out.glob("*.lock"))
