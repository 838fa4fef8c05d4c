"""The state of every run, rebuilt from the stream events alone.

The broker applies each event as it assigns its ``seq``, so ``status`` answers and
snapshots never ask the training thread anything. A snapshot is taken in two steps:
:meth:`RunTable.capture` copies the state under the broker's lock (cheap memory copies),
:func:`render_snapshot` decimates and serialises the copy on a sender thread.

Metric names: a ``train`` metric keeps its name; a metric of another split is named
``"<split>/<name>"`` (``val/loss``) in ``latest`` and in a snapshot's ``series``.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from onthefly.protocol import (
    SERVER_MESSAGE,
    Alert,
    AlertKind,
    Clock,
    ConfigValue,
    EpochEvent,
    EventModel,
    HealthResult,
    HparamChange,
    LineageChanged,
    LogEvent,
    LogRecord,
    Metrics,
    MetricsEvent,
    RunConfig,
    RunInfo,
    RunSnapshot,
    RunStarted,
    RunState,
    Snapshot,
    StatusChanged,
    StepsEvent,
    TestResult,
)
from onthefly.server.history import SeriesStore, Window, decimate

StreamModel = EventModel

LOG_TAIL = 500
"""Log records kept for snapshots (the most recent ones)."""

ALERT_HISTORY = 1000
"""Alerts kept per run (the most recent ones)."""

CLOCK_INTERVAL = 1.0
"""Seconds of training between two wall-clock anchors of a run."""


def series_key(split: str, name: str) -> str:
    """The name of a metric in ``latest`` and in a snapshot: ``loss``, ``val/loss``."""
    return name if split == "train" else f"{split}/{name}"


def split_of(key: str) -> tuple[str, str]:
    """The inverse of :func:`series_key`: ``val/loss`` -> ``("val", "loss")``."""
    split, _, name = key.partition("/")
    return (split, name) if split in ("val", "test") and name else ("train", key)


@dataclass
class _Run:
    """One run's state. What changes at every event (state, step, epoch, latest values) is
    kept in plain fields: a pydantic model is built only when a client asks (:meth:`info`)."""

    announced: RunInfo  # as the run was announced; its changing fields are the ones below
    state: RunState
    step: int
    epoch: int
    latest: Metrics
    epoch_starts: list[int] = field(default_factory=list)
    history: SeriesStore = field(default_factory=SeriesStore)
    hparam_changes: list[HparamChange] = field(default_factory=list)
    health: dict[str, HealthResult] = field(default_factory=dict)  # latest per check
    lineage: LineageChanged | None = None  # the latest
    alerts: dict[AlertKind, Alert] = field(default_factory=dict)  # raised, not cleared
    alert_history: deque[Alert] = field(default_factory=lambda: deque(maxlen=ALERT_HISTORY))
    config: dict[str, ConfigValue] = field(default_factory=dict)
    clock_steps: list[int] = field(default_factory=list)
    clock_times: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, info: RunInfo) -> _Run:
        return cls(
            info, info.state, info.step, info.epoch, dict(info.latest), config=dict(info.config)
        )

    def info(self) -> RunInfo:
        """The run as a new model (safe to serialise outside the broker's lock)."""
        live = {"state": self.state, "step": self.step, "epoch": self.epoch}
        changing = {"latest": dict(self.latest), "alerts": list(self.alerts)}
        return self.announced.model_copy(update={**live, **changing, "config": dict(self.config)})

    def alert(self, event: Alert) -> None:
        self.alert_history.append(event)
        if event.state == "raised":
            self.alerts[event.kind] = event
        else:
            self.alerts.pop(event.kind, None)

    def tick(self, step: int, at: float) -> None:
        """Keep a wall-clock anchor at most every :data:`CLOCK_INTERVAL` seconds."""
        times = self.clock_times
        if times and (at - times[-1] < CLOCK_INTERVAL or step <= self.clock_steps[-1]):
            return
        self.clock_steps.append(step)
        times.append(at)


@dataclass(frozen=True)
class Extras:
    """What a snapshot carries of a run besides its info and series (copies)."""

    hparam_changes: list[HparamChange] = field(default_factory=list)
    health: list[HealthResult] = field(default_factory=list)
    lineage: LineageChanged | None = None
    alert_history: list[Alert] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)

    @classmethod
    def of(cls, run: _Run) -> Extras:
        return cls(
            list(run.hparam_changes),
            list(run.health.values()),
            run.lineage,
            list(run.alert_history),
            Clock(steps=list(run.clock_steps), times=list(run.clock_times)),
        )


@dataclass(frozen=True)
class Capture:
    """A consistent copy of every run, taken at stream position ``seq``."""

    seq: int
    runs: list[tuple[RunInfo, list[int], dict[str, Window]]]
    logs: list[LogRecord]
    extras: list[Extras] = field(default_factory=list)
    """Per run (same order as ``runs``): its hyperparameter changes, latest health results,
    latest lineage, alerts and clock."""


class RunTable:
    """Every run of a session and the recent log records. Not thread-safe (broker's lock).

    Example:
        >>> table = RunTable()
        >>> "main" in table
        False
    """

    def __init__(self, log_tail: int = LOG_TAIL) -> None:
        self._runs: dict[str, _Run] = {}
        self._logs: deque[LogRecord] = deque(maxlen=log_tail)

    def __contains__(self, run: object) -> bool:
        return run in self._runs

    def infos(self) -> list[RunInfo]:
        """Every run, in creation order (copies: safe to serialise outside the lock)."""
        return [run.info() for run in self._runs.values()]

    def info(self, run: str) -> RunInfo:
        """One run (a copy). Raises ``KeyError`` for an unknown run."""
        return self._runs[run].info()

    def window(self, run: str, split: str, name: str, start: int | None, end: int | None) -> Window:
        """A copy of a metric's points between two steps. Raises ``KeyError`` for an unknown run."""
        return self._runs[run].history.window(split, name, start, end)

    def apply(self, event: StreamModel) -> None:
        """Fold one validated event into the state (its run must exist, unless it creates it)."""
        if isinstance(event, RunStarted):
            self._runs[event.run] = _Run.of(event.info)
            return
        if isinstance(event, LogEvent):
            self._logs.append(event.record)
            return
        run = self._runs[event.run]
        if isinstance(event, MetricsEvent):
            split, values = event.split, event.values
            run.history.add(split, event.step, values)
            if split == "train":
                run.latest.update(values)
                run.step, run.epoch = event.step, event.epoch
                run.tick(event.step, event.time)
            else:
                run.latest.update({series_key(split, k): v for k, v in values.items()})
        elif isinstance(event, StepsEvent):
            split = event.split
            for name, points in event.values.items():
                run.history.add_points(split, name, points.steps, points.values)
                if points.values:
                    run.latest[series_key(split, name)] = points.values[-1]
            if split == "train":
                run.step, run.epoch = event.steps[-1], event.epochs[-1]
                run.tick(event.steps[-1], event.time)
        elif isinstance(event, StatusChanged):
            run.state, run.step, run.epoch = event.state, event.step, event.epoch
        elif isinstance(event, EpochEvent):
            # Its step is the epoch's first, not yet taken: the run's step stays the steps done.
            run.epoch_starts.append(event.step)
            run.epoch = event.epoch
        elif isinstance(event, TestResult):
            test_values = {**event.metrics, "loss": event.loss}
            run.history.add("test", event.step, test_values)
            run.latest.update({series_key("test", k): v for k, v in test_values.items()})
        elif isinstance(event, HparamChange):
            run.hparam_changes.append(event)
        elif isinstance(event, HealthResult):
            run.health[event.check] = event
        elif isinstance(event, LineageChanged):
            run.lineage = event
        elif isinstance(event, Alert):
            run.alert(event)
        elif isinstance(event, RunConfig):
            run.config = dict(event.values)

    def restore(self, runs: list[RunSnapshot], logs: list[LogRecord]) -> None:
        """Put saved runs back (a resumed run's past, or an exported session being viewed);
        a run of the same id is replaced."""
        for saved in runs:
            fields = saved.model_dump(include=set(RunInfo.model_fields))
            run = _Run.of(RunInfo.model_validate(fields))
            run.epoch_starts = list(saved.epoch_starts)
            for key, series in saved.series.items():
                split, name = split_of(key)
                for index in _in_step_order(series.steps):
                    run.history.add(split, series.steps[index], {name: series.values[index]})
            run.hparam_changes = list(saved.hparam_changes)
            run.health = {result.check: result for result in saved.health}
            run.lineage = saved.lineage
            for alert in saved.alert_history:
                run.alert(alert)
            run.clock_steps = list(saved.clock.steps)
            run.clock_times = list(saved.clock.times)
            self._runs[saved.run] = run
        self._logs.extend(logs)

    def capture(self, seq: int) -> Capture:
        """Copy everything a snapshot needs, as of stream position ``seq``."""
        runs = []
        extras = []
        for run in self._runs.values():
            extras.append(Extras.of(run))
            windows = {
                series_key(split, name): run.history.window(split, name)
                for split, name in run.history.names()
            }
            runs.append((run.info(), list(run.epoch_starts), windows))
        return Capture(seq=seq, runs=runs, logs=list(self._logs), extras=extras)


def render_snapshot(capture: Capture, session: str, max_points: int | None) -> bytes:
    """Serialise a captured state as a ``snapshot`` frame (decimated to ``max_points``)."""
    extras = capture.extras or [Extras()] * len(capture.runs)
    runs = [
        RunSnapshot(
            **info.model_dump(),
            series={key: decimate(window, max_points) for key, window in windows.items()},
            epoch_starts=epoch_starts,
            **vars(more),  # the snapshot's fields besides the info and the series
        )
        for (info, epoch_starts, windows), more in zip(capture.runs, extras, strict=True)
    ]
    snapshot = Snapshot(
        session=session, seq=capture.seq, time=time.time(), runs=runs, logs=capture.logs
    )
    return SERVER_MESSAGE.dump_json(snapshot)


def _in_step_order(steps: list[int]) -> Iterable[int]:
    """The indices of ``steps`` in step order: a saved series is in order, but one from a
    crafted file inserted point by point out of order would take quadratic time."""
    if all(a <= b for a, b in zip(steps, itertools.islice(steps, 1, None), strict=False)):
        return range(len(steps))
    return sorted(range(len(steps)), key=steps.__getitem__)
