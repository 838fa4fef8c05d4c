"""Start the ranks of a distributed test run as real processes, and always clean them up.

Each rank is started the way ``torchrun`` starts it (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in the environment) but without its
agent, so a test sees every rank's own exit status and output, and a rank can be killed
without the launcher ending the others. A script whose framework starts the other ranks
itself (Lightning's ``ddp`` and ``ddp_spawn``) is started once, without those variables.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Ranks:
    """The processes of one run, their output files and what they recorded."""

    folder: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def out(self, rank: int) -> str:
        return (self.folder / f"out.{rank}.txt").read_text()

    def err(self, rank: int) -> str:
        return (self.folder / f"err.{rank}.txt").read_text()

    def wait(self, timeout: float = 60) -> list[int]:
        deadline = time.monotonic() + timeout
        return [p.wait(timeout=max(deadline - time.monotonic(), 0.1)) for p in self.processes]

    def steps(self, rank: int) -> list[dict[str, Any]]:
        """The batches ``rank`` trained, as the script recorded them."""
        path = self.folder / f"steps.{rank}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def kill(self, rank: int, sig: int = signal.SIGKILL) -> None:
        self.processes[rank].send_signal(sig)


@contextmanager
def launched(
    module: str,
    args: list[str],
    home: Path,
    folder: Path,
    ranks: int = 2,
    env: dict[str, str] | None = None,
    self_launching: bool = False,
) -> Iterator[Ranks]:
    """Run ``python -m module args`` as ``ranks`` ranks (once when ``self_launching``); kill
    what still runs on the way out."""
    folder.mkdir(parents=True, exist_ok=True)
    run = Ranks(folder)
    port = str(free_port())
    base = dict(os.environ, **(env or {}), ONTHEFLY_HOME=str(home), ONTHEFLY_KEEP_ALIVE="0")
    base.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    try:
        for rank in range(1 if self_launching else ranks):
            rank_env = dict(base)
            if not self_launching:
                rank_env.update(
                    RANK=str(rank),
                    LOCAL_RANK=str(rank),
                    WORLD_SIZE=str(ranks),
                    LOCAL_WORLD_SIZE=str(ranks),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=port,
                )
            with (
                (folder / f"out.{rank}.txt").open("wb") as out,
                (folder / f"err.{rank}.txt").open("wb") as err,
            ):
                run.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", module, *args],
                        cwd=ROOT,
                        env=rank_env,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,  # its children (Lightning's) go with it
                    )
                )
        yield run
    finally:
        for process in run.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in run.processes:
            process.wait(timeout=30)
