"""Writes a session file, then starts rewriting it and hangs mid-way (to be killed)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from onthefly.sessions.manifest import MODEL
from onthefly.sessions.writer import ArchiveWriter
from tests.sessions.test_archive import manifest


def write(path: Path, step: int, hang: bool) -> None:
    with ArchiveWriter(path) as writer:
        writer.add_torch(MODEL, {"w": torch.full((1 << 18,), float(step))})
        if hang:
            print("writing", flush=True)
            time.sleep(600)
        writer.commit(manifest(step=step))


if __name__ == "__main__":
    target = Path(sys.argv[1])
    write(target, 1, hang=False)
    write(target, 2, hang=True)
