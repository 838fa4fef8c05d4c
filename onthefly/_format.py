"""Human-readable text for the CLI: session lists, run status, command replies, stream lines.

Pure functions from protocol data to strings; the CLI's ``--json`` output bypasses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from onthefly.protocol import (
    Alert,
    Coalesced,
    EpochEvent,
    ForkProgress,
    HealthResult,
    HparamChange,
    LineageChanged,
    LogEvent,
    MetricsEvent,
    RunConfig,
    RunStarted,
    RuntimeEvent,
    ScanProgress,
    Snapshot,
    StatusChanged,
    TestResult,
)
from onthefly.server.discovery import SessionFile


def number(value: Any) -> str:
    """A metric value: 4 significant digits; ``n/a`` for ``null`` (NaN or infinite at source)."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def metrics(values: Mapping[str, Any]) -> str:
    """``loss=0.4132 acc=0.875``, or ``(none)``."""
    return " ".join(f"{k}={number(v)}" for k, v in values.items()) or "(none)"


_WHERE = ("state", "label", "step", "epoch")


def _where(data: Mapping[str, Any]) -> str:
    """``paused at step 118, epoch 1`` (or ``test_1 at step 118``) from a reply or event."""
    parts = [str(data[k]) for k in ("state", "label") if k in data]
    if "step" in data:
        parts.append(f"at step {data['step']}")
    text = " ".join(parts)
    return f"{text}, epoch {data['epoch']}" if "epoch" in data else text


def sessions(found: list[SessionFile], where: str) -> str:
    """A table of live sessions, or a line saying there are none."""
    if not found:
        return f"no live sessions in {where}"
    rows = [("PORT", "PID", "RUN", "STARTED")]
    for s in found:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_at))
        rows.append((str(s.port), str(s.pid), f"{s.project}/{s.run}", started))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    )


def status(data: Mapping[str, Any]) -> str:
    """``mnist/baseline: running at step 120, epoch 1``, the latest metrics, then the alerts
    raised (``alerts: nonfinite_loss, stalled``) when there are any."""
    name = data.get("run") or f"{data.get('project')}/{data.get('name')}"
    text = f"{name}: {_where(data)}\n  {metrics(data.get('latest') or {})}"
    raised = data.get("alerts") or []
    return text + (f"\n  alerts: {', '.join(raised)}" if raised else "")


def reply(command: str, data: Mapping[str, Any]) -> str:
    """``pause: paused at step 118, epoch 1`` plus any other reply fields as ``key=value``."""
    head = _where(data) or "ok"
    rest = {k: v for k, v in data.items() if k not in _WHERE}
    extra = " ".join(f"{k}={v if isinstance(v, str) else number(v)}" for k, v in rest.items())
    return f"{command}: {head}" + (f" ({extra})" if extra else "")


def health(data: Mapping[str, Any]) -> str:
    """A health check's reply: a head line, then one line per finding, worst first."""
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(data.get("findings", []), key=lambda f: order.get(f["severity"], 3))
    head = f"health {data.get('check')} at step {data.get('step')}"
    if "duration" in data:
        head += f" ({data['duration']:.2f} s)"
    lines = [f"  {f['severity']:<8} {f['summary']}" for f in findings]
    return "\n".join([head + ":", *lines] if lines else [head + ": no findings"])


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(number(v) for v in value) + ")"
    return number(value)


def _change(change: Mapping[str, Any]) -> str:
    optimizer = f"optimizer {change['optimizer']} " if change.get("optimizer") else ""
    return (
        f"{change['name']} of {optimizer}group {change['group']}: {_value(change['old'])} -> "
        f"{_value(change['new'])} at step {change['step']}"
    )


def hparam_changes(data: Mapping[str, Any]) -> str:
    """The ``set`` reply: one line per changed hyperparameter and group."""
    return "\n".join(f"set: {_change(change)}" for change in data.get("changes", []))


def _snapshot(m: Snapshot) -> str:
    runs = "; ".join(f"{r.run} {_where(r.model_dump())}" for r in m.runs) or "no runs yet"
    return f"seq {m.seq}: {runs}"


def _runtime(m: RuntimeEvent) -> str:
    parts = [f"step {m.step}"]
    if m.step_time is not None:
        parts.append(f"{m.step_time * 1000:.3g} ms/step")
    if m.samples_per_s is not None:
        parts.append(f"{m.samples_per_s:.0f} samples/s")
    if m.cpu_percent is not None:
        parts.append(f"cpu {m.cpu_percent:.0f}%")
    if m.rss_bytes is not None:
        parts.append(f"rss {m.rss_bytes / 2**30:.2f} GiB")
    parts.extend(f"gpu{g.index} {number(g.utilization)}%" for g in m.gpus)
    return f"{m.run}: " + ", ".join(parts)


def _status_changed(m: StatusChanged) -> str:
    reason = f" ({m.reason})" if m.reason else ""
    return f"{m.run}: {_where(m.model_dump())}{reason}"


_EVENT_TEXT: dict[type, Callable[[Any], str]] = {
    Snapshot: _snapshot,
    RunStarted: lambda m: f"{m.run}: started ({m.info.state} at step {m.info.step})",
    StatusChanged: _status_changed,
    MetricsEvent: lambda m: f"{m.run}: {m.split} step {m.step}: {metrics(m.values)}",
    EpochEvent: lambda m: f"{m.run}: epoch {m.epoch} starts at step {m.step}",
    RuntimeEvent: _runtime,
    LogEvent: lambda m: f"{m.run}: {m.record.level} {m.record.logger}: {m.record.message}",
    TestResult: lambda m: (
        f"{m.run}: {m.label} at step {m.step}: loss={number(m.loss)} {metrics(m.metrics)} "
        f"({m.duration:.2f} s)"
    ),
    HealthResult: lambda m: (
        f"{m.run}: {m.check} at step {m.step}: "
        + ("; ".join(f"{f.severity} {f.summary}" for f in m.findings) or "no findings")
    ),
    HparamChange: lambda m: f"{m.run}: {_change(m.model_dump())}",
    ScanProgress: lambda m: f"{m.run}: scan of {m.split} {m.state}, {m.done}/{number(m.total)}",
    ForkProgress: lambda m: (
        f"{m.run}: fork {m.fork} {m.state}, step {m.step}/{number(m.total)}, loss={number(m.loss)}"
        + (f" ({m.message})" if m.message else "")
    ),
    LineageChanged: lambda m: f"{m.run}: lineage of {len(m.nodes)} models, active {m.active}",
    Alert: lambda m: f"{m.run}: {m.severity} {m.kind} {m.state} at step {m.step}: {m.message}",
    RunConfig: lambda m: f"{m.run}: config {metrics(m.values)}",
    Coalesced: lambda m: (
        f"fell behind: skipped {m.dropped} telemetry events (seq {m.from_seq}-{m.to_seq})"
    ),
}


def stream_line(message: Any) -> str:
    """One line per stream message: its type, then what it says."""
    return f"{message.type:<11} {_EVENT_TEXT[type(message)](message)}"
