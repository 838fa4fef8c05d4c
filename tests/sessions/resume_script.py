"""Resumes ``tests.sessions.training``'s native run from a file; prints the losses as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from tests.sessions.training import native_run

if __name__ == "__main__":
    torch.set_num_threads(1)
    path, steps, workers = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(native_run(steps, workers, resume_from=path).losses))
