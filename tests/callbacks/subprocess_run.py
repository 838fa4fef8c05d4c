"""Start ``tests.callbacks.run_lightning`` as a real subprocess and always clean it up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests import interruptible

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Training:
    process: subprocess.Popen[bytes]
    out: Path
    err: Path
    stamps: Path
    ranks: int = 1

    def wait(self, timeout: float = 60) -> int:
        return self.process.wait(timeout=timeout)

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()

    def step_running_at(self, t: float, rank: int | None = None) -> int:
        """The last step that had started at time ``t`` (0 if none), on ``rank`` with DDP."""
        path = self.stamps if rank is None else Path(f"{self.stamps}.{rank}")
        lines = path.read_text().splitlines() if path.exists() else []
        return max((s["step"] for s in map(json.loads, lines) if s["t"] <= t), default=0)

    def last_started(self, rank: int | None = None) -> int:
        return self.step_running_at(float("inf"), rank)


@contextmanager
def training(
    home: Path, tmp: Path, *args: str, keep_alive: str = "0", ranks: int = 1
) -> Iterator[Training]:
    """Run the script with ``args`` (under torchrun when ``ranks > 1``); kill it on the way
    out if it still runs."""
    env = dict(os.environ, ONTHEFLY_HOME=str(home), ONTHEFLY_KEEP_ALIVE=keep_alive)
    env["PYTHONUNBUFFERED"] = "1"
    run = Training(None, tmp / "out.txt", tmp / "err.txt", tmp / "stamps.jsonl", ranks)  # type: ignore[arg-type]
    run.stamps.touch()
    script = ["tests.callbacks.run_lightning", "--stamps", str(run.stamps)]
    # Through tests.interruptible: a test may Ctrl+C it, also when the suite ignores SIGINT.
    command = interruptible.command("-m", *script)
    if ranks > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
        command = [sys.executable, *launcher, "-m", "tests.interruptible", "-m", *script, "--ddp"]
    with run.out.open("wb") as out, run.err.open("wb") as err:
        # Its own process group, so that torchrun's workers go with it if it must be killed.
        run.process = subprocess.Popen(
            [*command, *args], cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True
        )
        try:
            yield run
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGKILL)
            run.process.wait(timeout=30)
