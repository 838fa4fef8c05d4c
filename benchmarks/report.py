"""Write ``benchmarks/RESULTS.md`` from the JSON that ``make bench`` saves.

Each benchmark reports its median time and the figures it recorded in ``extra_info``
(ratios against a baseline measured in the same run, rates, counts); a benchmark that
records ``extra_info["table"]`` (``{"columns": [...], "rows": [[...], ...]}``, the quality
benchmarks) gets it as a table of its own. The dashboard's browser measurements and the
hardening runs' figures (``make stress``) follow when present.
Usage::

    python benchmarks/report.py [.benchmarks/latest.json]
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_INPUT = HERE.parent / ".benchmarks" / "latest.json"
DASHBOARD_PERF = HERE.parent / "extension" / "test-results" / "perf.json"
HARDENING = HERE.parent / ".benchmarks" / "hardening.json"
OUTPUT = HERE / "RESULTS.md"

HEADER = """# Benchmark results

Measured by `make bench` (pytest-benchmark, `--benchmark-only`) on {machine}, {date}.
Figures that matter are ratios against a baseline measured in the same run, so they hold
across machines better than absolute times; absolute times on shared 2-core machines are
noisy. Reproduce with `make bench`; this file is rewritten by `python benchmarks/report.py`.
"""


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(data: dict[str, Any]) -> str:
    """The markdown report for one pytest-benchmark JSON document."""
    machine = data.get("machine_info", {})
    lines = [
        HEADER.format(
            machine=f"{machine.get('cpu', {}).get('brand_raw', platform.processor())} "
            f"({machine.get('cpu', {}).get('count', '?')} cores), "
            f"Python {machine.get('python_version', platform.python_version())}",
            date=data.get("datetime", "")[:10],
        )
    ]
    by_module: dict[str, list[dict[str, Any]]] = {}
    for bench in data.get("benchmarks", []):
        module = bench["fullname"].split("::")[0]
        by_module.setdefault(module, []).append(bench)
    for module, benches in sorted(by_module.items()):
        lines.append(f"\n## `{module}`\n")
        lines.append("| benchmark | median | figures |")
        lines.append("| --- | --- | --- |")
        tables = []
        for bench in benches:
            median_ms = bench["stats"]["median"] * 1e3
            figures = dict(bench.get("extra_info", {}))
            table = figures.pop("table", None)
            extra = ", ".join(f"{k} = {_figure(v)}" for k, v in figures.items())
            lines.append(f"| `{bench['name']}` | {median_ms:.3f} ms | {extra} |")
            if table:
                tables.append(render_table(bench["name"], table))
        lines.extend(tables)
    return "\n".join(lines) + "\n"


def render_table(name: str, table: dict[str, Any]) -> str:
    """A benchmark's own table: its columns, then one line per row (``None`` shown as -)."""
    columns = table["columns"]
    lines = [f"\n### `{name}`\n", "| " + " | ".join(columns) + " |"]
    lines.append("| " + " | ".join("---" for _ in columns) + " |")
    for row in table["rows"]:
        lines.append("| " + " | ".join("-" if v is None else _figure(v) for v in row) + " |")
    return "\n".join(lines)


def render_rows(title: str, column: str, rows: dict[str, dict[str, Any]]) -> str:
    """A section with one row of figures per measurement (the dates they carry left out)."""
    lines = [f"\n## {title}\n", f"| {column} | figures |", "| --- | --- |"]
    for name, figures in sorted(rows.items()):
        shown = ", ".join(
            f"{k} = {_figure(v)}"
            for k, v in figures.items()
            if k not in ("measuredAt", "measured_at")
        )
        lines.append(f"| `{name}` | {shown} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    if not source.is_file():
        print(f"no benchmark results at {source}; run `make bench` first", file=sys.stderr)
        return 2
    text = render(json.loads(source.read_text(encoding="utf-8")))
    if DASHBOARD_PERF.is_file():
        perf = json.loads(DASHBOARD_PERF.read_text(encoding="utf-8"))
        title = "Dashboard in real headless Chromium (`extension/test-results/perf.json`)"
        text += render_rows(title, "measurement", perf)
    if HARDENING.is_file():
        runs = json.loads(HARDENING.read_text(encoding="utf-8"))
        text += render_rows("Reliability (`make stress`, `tests/hardening/`)", "run", runs)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
