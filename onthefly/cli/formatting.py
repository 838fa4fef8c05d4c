"""Human-readable text for the CLI: session lists, run status, command replies, stream lines.

Pure functions from protocol data to strings; the CLI's ``--json`` output bypasses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onthefly.client.resolve import name_of
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
    StepsEvent,
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
    rows = [(str(s.port), str(s.pid), name_of(s), when(s.started_at), _kind(s)) for s in found]
    return table(("PORT", "PID", "RUN", "STARTED", "KIND"), rows)


def _kind(session: SessionFile) -> str:
    if session.viewing is None:
        return "training"
    return f"view of {session.viewing.rsplit('/', 1)[-1]} (read-only)"


def status(data: Mapping[str, Any]) -> str:
    """``mnist/baseline: running at step 120, epoch 1``, the latest metrics, then the alerts
    raised (``alerts: nonfinite_loss, stalled``) when there are any."""
    name = data.get("run") or f"{data.get('project')}/{data.get('name')}"
    text = f"{name}: {_where(data)}\n  {metrics(data.get('latest') or {})}"
    raised = data.get("alerts") or []
    return text + (f"\n  alerts: {', '.join(raised)}" if raised else "")


def when(timestamp: float) -> str:
    """A UNIX time as a local date and time: ``2026-12-01 09:41:07``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def size(count: float) -> str:
    """A byte count: ``812 B``, ``3.4 KiB``, ``1.2 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns two spaces apart; numbers as :func:`number` writes them."""
    cells = [list(headers)] + [[c if isinstance(c, str) else number(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def reply(command: str, data: Mapping[str, Any]) -> str:
    """A command's reply as text: its own layout where it has one (``checkpoints``,
    ``test``, ``export``, ...), else ``pause: paused at step 118, epoch 1`` plus any other
    fields as ``key=value``."""
    own = _REPLY_TEXT.get(command)
    if own is not None:
        return own(data)
    head = _where(data) or "ok"
    rest = {k: v for k, v in data.items() if k not in _WHERE}
    extra = " ".join(f"{k}={v if isinstance(v, str) else number(v)}" for k, v in rest.items())
    return f"{command}: {head}" + (f" ({extra})" if extra else "")


def _checkpoints(data: Mapping[str, Any]) -> str:
    entries = data.get("checkpoints") or []
    bound = (
        f"the ring keeps the last {data.get('capacity')} within {size(data['max_bytes'])}"
        if "max_bytes" in data
        else ""
    )
    if not entries:
        return f"no checkpoints yet ({bound})" if bound else "no checkpoints yet"
    rows = [
        (e["id"], e["step"], e["epoch"], e["reason"], when(e["time"]), size(e["size"]))
        for e in entries
    ]
    listing = table(("ID", "STEP", "EPOCH", "REASON", "SAVED", "SIZE"), rows)
    return f"{listing}\n({bound}; load one with `onthefly restore ID`)" if bound else listing


def _snapshot_entry(data: Mapping[str, Any]) -> str:
    return (
        f"snapshot: checkpoint {data['id']} at step {data['step']}, epoch {data['epoch']} "
        f"({size(data['size'])}, {when(data['time'])})"
    )


def _test(data: Mapping[str, Any]) -> str:
    head = f"test: {data.get('label')} at step {data.get('step')}"
    if "duration" in data:
        head += f" ({data['duration']:.2f} s)"
    values = {"loss": data.get("loss"), **(data.get("metrics") or {})}
    return head + "\n" + table(("METRIC", "VALUE"), list(values.items()))


def _export(data: Mapping[str, Any]) -> str:
    return (
        f"export: wrote {data.get('path')} ({size(data.get('size') or 0)}) at step "
        f"{data.get('step')}, epoch {data.get('epoch')}"
    )


def _stop(data: Mapping[str, Any]) -> str:
    if data.get("stopping"):
        return f"stop: stopping after step {data.get('step')}, epoch {data.get('epoch')}"
    return f"stop: {_where(data)}"


_REPLY_TEXT: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "checkpoints": _checkpoints,
    "snapshot": _snapshot_entry,
    "test": _test,
    "export": _export,
    "stop": _stop,
}


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
    StepsEvent: lambda m: (
        f"{m.run}: {m.split} steps {m.steps[0]}-{m.steps[-1]}, the last: "
        + metrics({name: p.values[-1] for name, p in m.values.items() if p.values})
    ),
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
