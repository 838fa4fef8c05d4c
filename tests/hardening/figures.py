"""Figures of the hardening runs, kept for ``benchmarks/RESULTS.md``.

Under ``make stress`` (``ONTHEFLY_RECORD_FIGURES=1``) each run merges its figures into
``.benchmarks/hardening.json`` under its own name (the latest run of each kind wins);
``benchmarks/report.py`` renders them. Otherwise they are only printed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

FILE = Path(__file__).resolve().parents[2] / ".benchmarks" / "hardening.json"


def record(name: str, figures: dict[str, Any]) -> None:
    """Print ``figures`` and keep them as the latest of ``name``."""
    print(f"{name} figures:", figures)
    if os.environ.get("ONTHEFLY_RECORD_FIGURES") != "1":
        return
    FILE.parent.mkdir(exist_ok=True)
    kept = json.loads(FILE.read_text(encoding="utf-8")) if FILE.is_file() else {}
    kept[name] = {**figures, "measured_at": time.strftime("%Y-%m-%d")}
    FILE.write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
