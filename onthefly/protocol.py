"""Wire messages between a training process and its dashboards.

Every frame on the websocket is one JSON object validated by one of two adapters:

* :data:`SERVER_MESSAGE` — what the session server sends: stream events (each with a
  strictly increasing ``seq``), a ``batch`` of stream events, a ``snapshot``, the
  ``hello`` greeting, per-client notices (``coalesced``) and the replies to commands
  (``reply`` / ``error``).
* :data:`CLIENT_COMMAND` — what a client sends: commands, each with an ``id`` that the
  single reply to it repeats.

All unions are discriminated on ``type`` and every model forbids unknown fields. Floats
that are NaN or infinite are serialised as ``null`` (browsers reject ``NaN`` in JSON).
The JSON Schema written by ``python -m onthefly.schema`` is the source of the
dashboard's TypeScript types.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

PROTOCOL_VERSION: Final = 1
"""Bumped on any incompatible change of the messages below."""

MAX_FRAME_BYTES = 1 << 20
"""Largest client frame the server accepts (1 MiB); larger ones get ``frame_too_large``."""

FILE_EXISTS: Final = "exists; expected a new file name, or overwrite to replace it"
"""What a ``file_error`` refusing an export onto an existing file says (after the path), so
that a client can offer to replace it."""

RunState = Literal["running", "paused", "testing", "finished"]
Split = Literal["train", "val", "test"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
Metrics = dict[str, float | None]
MetricValues = Mapping[str, float | None]
"""Values by metric name, as an event takes them (a plain ``dict[str, float]`` is one)."""
ConfigValue = float | int | str | bool | None
"""One value of a run's configuration: a number, a name, a flag, or unknown."""
HealthCheck = Literal[
    "determinism", "gradients", "instability", "activations", "throughput", "distribution"
]
Severity = Literal["info", "warning", "error"]
HparamName = Literal["lr", "weight_decay", "momentum", "betas", "eps"]
HparamValue = float | list[float]
SampleSource = Literal["training", "scan"]
"""Per-sample data of a split: the running training statistics, or the latest scan."""
SelectionName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
"""A hyperparameter's value: a number, or a pair for ``betas``."""
RunRef = Annotated[str, Field(min_length=1, max_length=200)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
"""A float that cannot be ``null`` on the wire: NaN or infinity fails when the message is
built, rather than being sent as a ``null`` that every receiver rejects."""

ErrorCode = Literal[
    "bad_json",  # the frame is not a JSON object
    "bad_message",  # a known type with missing, extra or ill-typed fields
    "unknown_type",  # ``type`` names no command
    "frame_too_large",  # over MAX_FRAME_BYTES
    "rate_limited",  # too many frames per second from this client
    "unknown_run",  # ``run`` names no run of this session
    "invalid_state",  # the command does not apply in the run's current state
    "busy",  # another command of the same kind is still running
    "session_closed",  # the run ended before the command could take effect
    "unsupported",  # valid, but this run cannot do it (e.g. no test loader)
    "file_error",  # a file could not be written or read, or exists (the message says why)
    "internal",  # a bug: the message says what failed, never a traceback
]


class Message(BaseModel):
    """Base of every wire message: unknown fields are an error."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_serialization_defaults_required=True,
        ser_json_inf_nan="null",
    )


# --------------------------------------------------------------------------- payload parts


class GpuStats(Message):
    """One GPU as NVML sees it; fields NVML cannot read are ``None``."""

    index: int
    name: str
    utilization: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    temperature: float | None = None
    power_watts: float | None = None


class Points(Message):
    """One metric's values at some of a batch's steps, in step order (``None``: NaN or
    infinite, a gap)."""

    steps: list[int]
    values: list[float | None]

    @model_validator(mode="after")
    def _one_value_per_step(self) -> Points:
        if len(self.steps) != len(self.values):
            raise ValueError(
                f"{len(self.steps)} steps and {len(self.values)} values; expected one value "
                "per step"
            )
        return self


class Series(Points):
    """A metric's points, in step order. Decimated series keep each bucket's min and max."""

    decimated: bool = False


class LogRecord(Message):
    """A forwarded Python ``logging`` record or warning."""

    time: FiniteFloat
    level: LogLevel
    logger: str
    message: str


AlertKind = Literal[
    "nonfinite_loss",  # the training loss is NaN or infinite
    "nonfinite_grad",  # the gradient norm is NaN or infinite
    "loss_spike",  # a training loss far above the recent ones
    "stalled",  # no training step for many times the usual step time
    "loader_crashed",  # a data loader raised (or its worker died) and ended the run
    "crashed",  # another exception ended the run
]
"""What an ``alert`` is about."""


class RunInfo(Message):
    """What a client needs to know about one run of the session."""

    run: str
    project: str
    name: str
    parent: str | None = None
    state: RunState
    step: int
    epoch: int
    started_at: FiniteFloat
    latest: Metrics = Field(default_factory=dict)
    alerts: list[AlertKind] = Field(default_factory=list)
    """The alerts raised and not cleared, oldest first."""
    config: dict[str, ConfigValue] = Field(default_factory=dict)
    """The run's configuration as training started (see the ``config`` event)."""


class Clock(Message):
    """Wall-clock anchors of a run: at ``steps[i]`` it was ``times[i]`` (UNIX seconds). One
    anchor per second of training at most, so a step's time is interpolated between two."""

    steps: list[int] = Field(default_factory=list)
    times: list[float] = Field(default_factory=list)


class RunSnapshot(RunInfo):
    """A run with its history, as sent in a snapshot."""

    series: dict[str, Series] = Field(default_factory=dict)
    epoch_starts: list[int] = Field(default_factory=list)
    hparam_changes: list[HparamChange] = Field(default_factory=list)
    health: list[HealthResult] = Field(default_factory=list)
    """The latest result of each health check."""
    lineage: LineageChanged | None = None
    """The latest lineage of forks and merges published on this run, if any."""
    alert_history: list[Alert] = Field(default_factory=list)
    """Every alert of the run (raised and cleared), in order."""
    clock: Clock = Field(default_factory=Clock)


class ErrorInfo(Message):
    code: ErrorCode
    message: str


class Finding(Message):
    """One observation of a health check: how bad, a one-line summary, and the numbers."""

    check: HealthCheck
    severity: Severity
    summary: str
    details: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------- stream events


class EventBody(Message):
    """What a publisher builds: one stream event's own fields, without the envelope that the
    session server adds (``v``, ``session``, ``run``, ``seq``, ``time``). Each event model is
    its body plus :class:`EventBase`, so a misspelt or ill-typed field fails when the body is
    built, on the publishing side."""

    type: str
    """The event's tag: each body narrows it to its own literal."""


class EventBase(Message):
    """Envelope of every stream event."""

    v: Literal[1] = PROTOCOL_VERSION
    session: str
    run: str
    seq: int = Field(ge=1)
    time: FiniteFloat


class RunStartedBody(EventBody):
    """The fields of a ``run_started`` event (:class:`RunStarted`) without the envelope."""

    type: Literal["run_started"] = "run_started"
    info: RunInfo


class RunStarted(RunStartedBody, EventBase):
    """A new run of the session (the main run, a fork or a merge) and what is known of it."""


class StatusBody(EventBody):
    """The fields of a ``status`` event (:class:`StatusChanged`) without the envelope."""

    type: Literal["status"] = "status"
    state: RunState
    step: int
    epoch: int
    reason: str | None = None


class StatusChanged(StatusBody, EventBase):
    """The run's state changed (``reason`` says why), at ``step`` of ``epoch``."""


class MetricsBody(EventBody):
    """The fields of a ``metrics`` event (:class:`MetricsEvent`) without the envelope."""

    type: Literal["metrics"] = "metrics"
    split: Split = "train"
    step: int
    epoch: int
    values: MetricValues


class MetricsEvent(MetricsBody, EventBase):
    """Values for one step of one split (``train`` per optimizer step; ``val``/``test`` per run)."""


class StepsBody(EventBody):
    """The fields of a ``steps`` event (:class:`StepsEvent`) without the envelope."""

    type: Literal["steps"] = "steps"
    split: Split = "train"
    steps: list[int] = Field(min_length=1)
    epochs: list[int] = Field(min_length=1)
    values: dict[str, Points]

    @model_validator(mode="after")
    def _one_epoch_per_step(self) -> StepsBody:
        if len(self.steps) != len(self.epochs):
            raise ValueError(
                f"{len(self.steps)} steps and {len(self.epochs)} epochs; expected one epoch "
                "per step"
            )
        return self


class StepsEvent(StepsBody, EventBase):
    """Consecutive optimizer steps of the training split at once, as columns: what ``metrics``
    events would say one by one (a metric a step lacks has no point at that step). The
    training loop ships its steps in batches; one event for a batch keeps the stream's cost
    per step small (the Python client hands them out as ``metrics`` events)."""


class EpochBody(EventBody):
    """The fields of an ``epoch`` event (:class:`EpochEvent`) without the envelope."""

    type: Literal["epoch"] = "epoch"
    epoch: int
    step: int


class EpochEvent(EpochBody, EventBase):
    """An epoch boundary: ``step`` is the first step of epoch ``epoch``."""


class RuntimeBody(EventBody):
    """The fields of a ``runtime`` event (:class:`RuntimeEvent`) without the envelope."""

    type: Literal["runtime"] = "runtime"
    step: int
    step_time: float | None = None
    data_wait: float | None = None
    samples_per_s: float | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    cuda_allocated: int | None = None
    cuda_reserved: int | None = None
    gpus: list[GpuStats] = Field(default_factory=list)


class RuntimeEvent(RuntimeBody, EventBase):
    """Runtime stats sampled about once a second (never per step)."""


class LogBody(EventBody):
    """The fields of a ``log`` event (:class:`LogEvent`) without the envelope."""

    type: Literal["log"] = "log"
    record: LogRecord


class LogEvent(LogBody, EventBase):
    """A forwarded Python ``logging`` record or warning of the training process."""


class TestOutcome(Message):
    """One evaluation of the test loader: the ``test`` command's reply and, with its tag, the
    ``test_result`` event."""

    __test__ = False  # not a pytest test class
    label: str
    step: int
    loss: float | None
    metrics: MetricValues
    duration: FiniteFloat


class TestResultBody(TestOutcome, EventBody):
    """The fields of a ``test_result`` event (:class:`TestResult`) without the envelope."""

    type: Literal["test_result"] = "test_result"


class TestResult(TestResultBody, EventBase):
    """One evaluation of the test loader, labelled ``test_1``, ``test_2``, …"""


class HealthOutcome(Message):
    """The findings of one health check: the ``health`` command's reply and, with its tag,
    the ``health_result`` event."""

    check: HealthCheck
    step: int
    findings: list[Finding]
    duration: FiniteFloat


class HealthResultBody(HealthOutcome, EventBody):
    """The fields of a ``health_result`` event (:class:`HealthResult`) without the envelope."""

    type: Literal["health_result"] = "health_result"


class HealthResult(HealthResultBody, EventBase):
    """The findings of one health check (``health`` command), run at a batch boundary."""


class HparamEdit(Message):
    """One hyperparameter of one param group changed at ``step``: an item of the ``set``
    reply and, with its tag, the ``hparam_change`` event."""

    step: int
    optimizer: int
    group: int
    name: HparamName
    old: HparamValue | None
    new: HparamValue


class HparamChangeBody(HparamEdit, EventBody):
    """The fields of a ``hparam_change`` event (:class:`HparamChange`) without the envelope."""

    type: Literal["hparam_change"] = "hparam_change"


class HparamChange(HparamChangeBody, EventBase):
    """One hyperparameter of one param group changed by the ``set`` command (a chart marker)."""


class RolledBack(Message):
    """One hyperparameter of one param group an ``hparam_error`` put back."""

    group: int
    name: HparamName
    restored: HparamValue | None
    """The value before the edit, in force again."""
    rejected: HparamValue
    """The edit's value, under which the optimizer failed."""


class HparamErrorBody(EventBody):
    """The fields of a ``hparam_error`` event (:class:`HparamError`) without the envelope."""

    type: Literal["hparam_error"] = "hparam_error"
    step: int
    """The step whose update failed."""
    optimizer: int
    message: str
    """What the optimizer raised."""
    rolled_back: list[RolledBack]


class HparamError(HparamErrorBody, EventBase):
    """An accepted ``set`` under which the optimizer's next step failed: the edit was rolled
    back, that step's update not applied, and the run paused (its ``status`` says why)."""


class ScanProgressBody(EventBody):
    """The fields of a ``scan_progress`` event (:class:`ScanProgress`) without the envelope."""

    type: Literal["scan_progress"] = "scan_progress"
    split: Split
    state: Literal["running", "done", "cancelled"]
    done: int = Field(ge=0)
    """Samples evaluated so far."""
    total: int | None = None
    """Samples in the split, when known."""
    elapsed: FiniteFloat


class ScanProgress(ScanProgressBody, EventBase):
    """Progress of a ``scan``: ``running`` while it goes, then ``done`` or ``cancelled``."""


ForkState = Literal["running", "done", "cancelled", "failed"]
"""Where a fork's training is: still going, finished its budget, cancelled, or raised."""
MergeMethod = Literal["soup", "greedy", "fisher", "distill", "adapter"]


class ForkProgressBody(EventBody):
    """The fields of a ``fork_progress`` event (:class:`ForkProgress`) without the envelope."""

    type: Literal["fork_progress"] = "fork_progress"
    fork: str
    """The fork's name."""
    state: ForkState
    step: int = Field(ge=0)
    """Optimizer steps the fork has taken."""
    total: int | None = None
    """Steps of its budget, when known."""
    loss: float | None = None
    """Its latest training loss."""
    elapsed: FiniteFloat
    message: str | None = None
    """Why it failed."""


class ForkProgress(ForkProgressBody, EventBase):
    """Progress of a fork's training (``fork``), on the fork's own run: ``running`` about every
    0.25 s, then ``done``, ``cancelled`` or ``failed`` (with ``message``)."""


class LineageNode(Message):
    """One model of a session's lineage: the main run, a fork or a merge.

    A node's training metrics are the series of run ``metrics_run`` from step ``from_step``
    on: a fork streams into a run of its own, a merge continues in the main run.
    """

    run: str
    """The node's id: its run id (a merge has a run of its own, announced but metric-less)."""
    name: str
    kind: Literal["main", "fork", "merge"]
    status: Literal["active", "superseded", "discarded", "running", "done", "cancelled", "failed"]
    """``active``: the model the trainer trains now; ``superseded``: a merge replaced it;
    ``discarded``: a merge undone; the other four are a fork's :data:`ForkState`."""
    parent: str | None = None
    parent_step: int | None = None
    """The parent's step when the fork or merge was made."""
    metrics_run: str
    from_step: int = 0
    method: MergeMethod | None = None
    selection: dict[str, Any] | None = None
    """A fork's slice: ``{name, criterion, size}`` (``name`` of a reused selection)."""
    budget: dict[str, int] | None = None
    """A fork's budget: ``{"steps": n}`` or ``{"epochs": n}``."""
    hparams: dict[str, Any] = Field(default_factory=dict)
    steps: int | None = None
    """Optimizer steps a fork took."""
    slice_loss: float | None = None
    """A fork's mean loss on its slice when it finished."""
    parent_slice_loss: float | None = None
    """The parent's mean loss on that slice when the fork was made."""
    message: str | None = None


class LineageEdge(Message):
    """``fork``: parent -> fork at the parent's ``step``; ``merge``: each source -> the merge."""

    source: str
    target: str
    kind: Literal["fork", "merge"]
    step: int
    method: MergeMethod | None = None


class LineageView(Message):
    """The session's models as a DAG: the ``lineage`` command's reply and, with its tag, the
    ``lineage`` event."""

    active: str
    """The node the trainer trains now."""
    nodes: list[LineageNode]
    edges: list[LineageEdge]


class LineageBody(LineageView, EventBody):
    """The fields of a ``lineage`` event (:class:`LineageChanged`) without the envelope."""

    type: Literal["lineage"] = "lineage"


class LineageChanged(LineageBody, EventBase):
    """The whole lineage, published on the main run whenever it changes (a fork starts or ends,
    a merge is made or discarded)."""


class AlertBody(EventBody):
    """The fields of an ``alert`` event (:class:`Alert`) without the envelope."""

    type: Literal["alert"] = "alert"
    kind: AlertKind
    state: Literal["raised", "cleared"]
    severity: Severity
    step: int
    message: str
    """One line saying what happened and what to look at."""
    details: dict[str, Any] = Field(default_factory=dict)
    """The numbers behind it (the value, the threshold, the exception's type, ...)."""


class Alert(AlertBody, EventBase):
    """Something in the run needs a look: ``raised`` when it happens, ``cleared`` when it no
    longer holds (a finite loss again, steps again; a spike clears itself after a quiet
    stretch). Detected from the values the run already ships, never with a host sync."""


class RunConfigBody(EventBody):
    """The fields of a ``config`` event (:class:`RunConfig`) without the envelope."""

    type: Literal["config"] = "config"
    values: dict[str, ConfigValue]


class RunConfig(RunConfigBody, EventBase):
    """The run's configuration, published as training starts: the optimizer and its
    hyperparameters, batch size, limits, model size and the module's own hyperparameters
    (Lightning's ``save_hyperparameters``)."""


EventModel = (
    RunStarted
    | StatusChanged
    | MetricsEvent
    | StepsEvent
    | EpochEvent
    | RuntimeEvent
    | LogEvent
    | TestResult
    | HealthResult
    | HparamChange
    | HparamError
    | ScanProgress
    | ForkProgress
    | LineageChanged
    | Alert
    | RunConfig
)
"""Every stream event model (each carries the envelope and a ``seq``)."""

Event = Annotated[EventModel, Field(discriminator="type")]


# --------------------------------------------------------------------------- per-client messages


class Hello(Message):
    """First frame on every connection."""

    type: Literal["hello"] = "hello"
    v: Literal[1] = PROTOCOL_VERSION
    session: str
    server: str
    project: str
    time: FiniteFloat
    max_frame_bytes: int = MAX_FRAME_BYTES


class Batch(Message):
    """Several stream events in one frame, in ``seq`` order."""

    type: Literal["batch"] = "batch"
    events: list[Event]


class Snapshot(Message):
    """State of every run up to and including stream event ``seq``; live events follow."""

    type: Literal["snapshot"] = "snapshot"
    v: Literal[1] = PROTOCOL_VERSION
    session: str
    seq: int = Field(ge=0)
    time: FiniteFloat
    runs: list[RunSnapshot]
    logs: list[LogRecord]


class Coalesced(Message):
    """This client fell behind: telemetry events in ``[from_seq, to_seq]`` were skipped.

    Only telemetry (``metrics``, ``steps``, ``runtime``, ``log``) is ever skipped; the full
    history stays available through the ``history`` command.
    """

    type: Literal["coalesced"] = "coalesced"
    from_seq: int
    to_seq: int
    dropped: int


class Reply(Message):
    """The successful answer to the command ``id``."""

    type: Literal["reply"] = "reply"
    id: str
    data: dict[str, Any] = Field(default_factory=dict)


class ErrorReply(Message):
    """The failed answer to the command ``id`` (``None`` when the frame had no readable id)."""

    type: Literal["error"] = "error"
    id: str | None
    error: ErrorInfo


ServerMessage = Annotated[
    EventModel | Hello | Batch | Snapshot | Coalesced | Reply | ErrorReply,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- commands


class CommandBase(Message):
    id: str = Field(min_length=1, max_length=64)
    run: RunRef | None = None
    """Target run; ``None`` means the session's main run."""


class Subscribe(CommandBase):
    """Start the live stream: a ``snapshot`` (or, with ``since``, the missed events) comes first."""

    type: Literal["subscribe"] = "subscribe"
    since: int | None = Field(default=None, ge=0)
    max_points: int | None = Field(default=None, ge=2, le=1_000_000)
    relay: bool = False
    """The subscriber keeps the run's history for others (the ``onthefly dashboard`` hub): it
    does not count as someone watching, so it never keeps a run open at its end."""


class Unsubscribe(CommandBase):
    type: Literal["unsubscribe"] = "unsubscribe"


class History(CommandBase):
    """A metric's series between steps ``start`` and ``end`` (inclusive), min/max-decimated."""

    type: Literal["history"] = "history"
    metric: str = Field(min_length=1, max_length=200)
    split: Split = "train"
    start: int | None = None
    end: int | None = None
    max_points: int = Field(default=4000, ge=2, le=1_000_000)


class Status(CommandBase):
    type: Literal["status"] = "status"


class Ping(CommandBase):
    type: Literal["ping"] = "ping"


class Pause(CommandBase):
    type: Literal["pause"] = "pause"


class Resume(CommandBase):
    """Resume a paused run; ``epochs``/``steps`` extend a run that reached its stop condition."""

    type: Literal["resume"] = "resume"
    epochs: int | None = Field(default=None, ge=1, le=1_000_000)
    steps: int | None = Field(default=None, ge=1, le=1_000_000_000)


class Stop(CommandBase):
    type: Literal["stop"] = "stop"


class RunTest(CommandBase):
    """Evaluate the test loader at the next boundary."""

    type: Literal["test"] = "test"
    label: str | None = Field(default=None, min_length=1, max_length=100)


class RunHealth(CommandBase):
    """Run one health check at the next boundary; the reply and a ``health_result`` hold its
    findings."""

    type: Literal["health"] = "health"
    check: HealthCheck


Beta = Annotated[float, Field(ge=0, lt=1)]


class SetHparams(CommandBase):
    """Change optimizer hyperparameters at the next boundary (every group unless ``group``).

    Each change is published as an ``hparam_change`` event; a scheduler keeps it (its base
    values are rescaled). Values are checked against the parameters' dtype before anything
    changes (``unsupported`` otherwise); should the optimizer still fail under an accepted
    edit, the edit is rolled back and the run paused (``hparam_error``).
    """

    type: Literal["set"] = "set"
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    weight_decay: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    momentum: float | None = Field(default=None, ge=0, lt=1)
    betas: tuple[Beta, Beta] | None = None
    eps: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    group: int | None = Field(default=None, ge=0)
    optimizer: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _something_to_set(self) -> SetHparams:
        values = (self.lr, self.weight_decay, self.momentum, self.betas, self.eps)
        if all(value is None for value in values):
            raise ValueError("nothing to set; expected lr, weight_decay, momentum, betas or eps")
        return self


SessionPath = Annotated[str, Field(min_length=1, max_length=4096)]
"""A file path on the training process's machine (absolute, or relative to its directory)."""


class Export(CommandBase):
    """Write the whole session to a ``.otf`` file at the next boundary (see docs/sessions.md).

    A file already at ``path`` is refused (``file_error``) unless ``overwrite``.
    """

    type: Literal["export"] = "export"
    path: SessionPath
    overwrite: bool = False


class Import(CommandBase):
    """Load a session file's model, optimizer, scheduler and scaler state into a paused run."""

    type: Literal["import"] = "import"
    path: SessionPath


class Checkpoints(CommandBase):
    """List the run's checkpoint ring (id, step, epoch, reason, time, size)."""

    type: Literal["checkpoints"] = "checkpoints"


class Restore(CommandBase):
    """Load checkpoint ``checkpoint``'s model, optimizer, scheduler and scaler into a paused run."""

    type: Literal["restore"] = "restore"
    checkpoint: str = Field(min_length=1, max_length=64)


class TakeSnapshot(CommandBase):
    """Add a snapshot of the run to its checkpoint ring now."""

    type: Literal["snapshot"] = "snapshot"


class Scan(CommandBase):
    """Evaluate every sample of a split with the current model (at the next boundary).

    Progress comes as ``scan_progress`` events; the reply summarises the pass.
    """

    type: Literal["scan"] = "scan"
    split: Split = "train"


class Cancel(CommandBase):
    """Cancel the scan, fork or merge in progress (the reply says whether there was one)."""

    type: Literal["cancel"] = "cancel"


class SampleQuery(CommandBase):
    """Per-sample data of one split: ``source`` ``None`` reads the latest scan, else training."""

    split: Split = "train"
    source: SampleSource | None = None


class Histogram(SampleQuery):
    """The per-sample loss histogram of a split: ``bins`` equal bins over [``min``, ``max``]."""

    type: Literal["histogram"] = "histogram"
    bins: int = Field(default=50, ge=1, le=10_000)
    min: FiniteFloat | None = None
    max: FiniteFloat | None = None


class Quantiles(SampleQuery):
    """Quantiles of the per-sample losses of a split."""

    type: Literal["quantiles"] = "quantiles"
    q: list[Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: [0.5, 0.9, 0.99], min_length=1, max_length=1000
    )


class Criteria(Message):
    """The criteria that choose samples by their loss or their place on the data map
    (``select``, ``fork``)."""

    top: int | None = Field(default=None, ge=1)
    loss_min: FiniteFloat | None = None
    loss_max: FiniteFloat | None = None
    quantile: float | None = Field(default=None, gt=0, lt=1)
    """Samples whose loss is at or above this quantile."""
    region: Literal["easy", "ambiguous", "hard", "mislabeled"] | None = None
    """A data-map region (docs/per-sample.md): a ranking by confidence or variability."""
    fraction: float | None = Field(default=None, gt=0, le=1)
    """Share of the samples a region takes (default 1/3; ``mislabeled``: the estimated
    number of mislabeled samples)."""
    size: int | None = Field(default=None, ge=1)
    """Instead of ``fraction``: exactly this many samples of the region's ranking."""
    with_correctness: bool = False
    """``mislabeled``: rank by the mean of confidence and correctness."""
    confidence_min: float | None = Field(default=None, ge=0, le=1)
    confidence_max: float | None = Field(default=None, ge=0, le=1)
    variability_min: float | None = Field(default=None, ge=0, le=1)
    variability_max: float | None = Field(default=None, ge=0, le=1)
    """A box on the data map: samples within these bounds (any of the four may be open)."""
    clusters: int | None = Field(default=None, ge=2, le=100)
    """k of a k-means over per-sample features; ``cluster`` picks one (0: highest loss)."""
    cluster: int = Field(default=0, ge=0)

    def box_given(self) -> bool:
        """Whether a bound of a data-map box is set."""
        bounds = (self.confidence_min, self.confidence_max)
        return any(b is not None for b in (*bounds, self.variability_min, self.variability_max))

    def criteria_given(self) -> int:
        """How many criteria are set (a loss range or a box counts once)."""
        given = [
            self.top is not None,
            self.loss_min is not None or self.loss_max is not None,
            self.quantile is not None,
            self.region is not None,
            self.box_given(),
            self.clusters is not None,
        ]
        return sum(given)

    def region_problem(self) -> str | None:
        """What is wrong with the region options, if anything."""
        if self.region is None and (
            self.fraction is not None or self.size is not None or self.with_correctness
        ):
            return "fraction, size and with_correctness apply to a region; expected region too"
        if self.fraction is not None and self.size is not None:
            return "a region takes a fraction or a size; expected one of them"
        if self.with_correctness and self.region != "mislabeled":
            return "with_correctness applies to the 'mislabeled' region only"
        return None


class Select(SampleQuery, Criteria):
    """Make a named selection of samples by exactly one criterion: ``top``, a loss range
    (``loss_min`` / ``loss_max``), ``quantile``, ``region``, a data-map box
    (``confidence_min`` … ``variability_max``) or ``clusters``."""

    type: Literal["select"] = "select"
    name: SelectionName | None = None

    @model_validator(mode="after")
    def _one_criterion(self) -> Select:
        if self.criteria_given() != 1:
            raise ValueError(
                "expected exactly one criterion: top, loss_min/loss_max, quantile, region, a "
                "box (confidence_min/_max, variability_min/_max) or clusters"
            )
        problem = self.region_problem()
        if problem is not None:
            raise ValueError(problem)
        return self


class Selections(CommandBase):
    """The run's selections (names, criteria, sizes)."""

    type: Literal["selections"] = "selections"


class SelectionRows(CommandBase):
    """A page of a selection's samples with their current statistics, sorted."""

    type: Literal["selection_rows"] = "selection_rows"
    name: SelectionName
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=10_000)
    sort: Literal[
        "loss", "index", "confidence", "variability", "correct", "margin", "count", "label"
    ] = "loss"
    descending: bool = True


class ExportSelection(CommandBase):
    """Write a selection's samples to ``directory``/``file`` (default ``<name>.<format>``)."""

    type: Literal["export_selection"] = "export_selection"
    name: SelectionName
    format: Literal["csv", "parquet", "json"] = "parquet"
    directory: str = Field(min_length=1, max_length=4096)
    """An absolute path to an existing folder."""
    file: str | None = Field(default=None, min_length=1, max_length=255)
    """A bare file name (no folder part)."""
    overwrite: bool = False
    """Replace a file already there (else it is refused: ``file_error``)."""


class DataMap(CommandBase):
    """Confidence and variability per sample (the data map), subsampled to ``max_points``."""

    type: Literal["data_map"] = "data_map"
    split: Split = "train"
    max_points: int = Field(default=20_000, ge=2, le=1_000_000)


class Explorer(CommandBase):
    """A 2-D projection (UMAP, else PCA) of a scanned split's embeddings, with losses."""

    type: Literal["explorer"] = "explorer"
    split: Split = "train"
    method: Literal["auto", "umap", "pca"] = "auto"
    max_points: int = Field(default=20_000, ge=2, le=1_000_000)


class SamplePreview(CommandBase):
    """What some samples of a split are, for the dashboard to show: a thumbnail of an
    image-like input (1-4 channels), the text or image of the run's ``describe_sample`` hook,
    or a compact summary of the tensor. At most 64 samples, each at most ``size`` pixels."""

    type: Literal["sample_preview"] = "sample_preview"
    split: Split = "train"
    indices: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, max_length=64)
    size: int = Field(default=64, ge=8, le=128)
    """The longest side of a thumbnail, in pixels."""


ForkName = SelectionName
"""A fork's or a merge's name: also its weights file's name, so no path separators."""


class Fork(Criteria, CommandBase):
    """Train a copy of the paused model on a slice of the training set (docs/forks.md).

    The slice is exactly one of: a train ``selection`` by name, explicit dataset ``indices``,
    or one inline criterion as in ``select`` (read from ``source``). The budget is exactly one
    of ``steps`` or ``epochs``. Progress comes as ``fork_progress`` events on the fork's run.
    """

    type: Literal["fork"] = "fork"
    name: ForkName | None = None
    """Default ``fork-<n>``."""
    selection: SelectionName | None = None
    indices: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1)
    source: SampleSource | None = None
    steps: int | None = Field(default=None, ge=1, le=10_000_000)
    epochs: int | None = Field(default=None, ge=1, le=100_000)
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Default: each param group's current learning rate."""
    batch_size: int | None = Field(default=None, ge=1, le=1_000_000)
    """Default: the training loader's."""
    optimizer: Literal["fresh", "clone"] = "fresh"
    """``fresh``: the run's optimizer class and hyperparameters, empty state; ``clone``: a copy
    of its state too (moments, step counts)."""
    adapter_rank: int | None = Field(default=None, ge=1, le=65_536)
    """Train only low-rank adapters of this rank on the Linear layers (for ``adapter`` merges)."""
    replay: float = Field(default=0.0, ge=0, lt=1)
    """The share of the fork's batches drawn from the rest of the training set (so that a
    specialist of a narrow slice does not forget the other classes); 0: the slice only."""

    @model_validator(mode="after")
    def _one_slice_one_budget(self) -> Fork:
        slices = [self.selection is not None, self.indices is not None, self.criteria_given() > 0]
        if sum(slices) != 1 or self.criteria_given() > 1:
            raise ValueError(
                "expected exactly one slice: selection, indices, or one criterion (top, "
                "loss_min/loss_max, quantile, region, a box or clusters)"
            )
        problem = self.region_problem()
        if problem is not None:
            raise ValueError(problem)
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("expected exactly one budget: steps or epochs")
        if self.adapter_rank is not None and self.optimizer == "clone":
            raise ValueError(
                "optimizer='clone' cannot go with adapter_rank: the adapters are new parameters "
                "the run's optimizer has no state for; expected optimizer='fresh'"
            )
        return self


class Forks(CommandBase):
    """The run's forks (name, run, slice, budget, status, losses)."""

    type: Literal["forks"] = "forks"


class Compare(CommandBase):
    """Evaluate the current model and ``forks`` (default: every fork with weights) on each
    fork's slice, the rest of the training set and the validation set, in one table."""

    type: Literal["compare"] = "compare"
    forks: list[ForkName] = Field(default_factory=list, max_length=32)
    rest_max: int = Field(default=10_000, ge=1, le=100_000_000)
    """The rest of the training set is evaluated on at most this many samples (a fixed
    random sample)."""
    baselines: bool = True
    """Add the rows a fork must beat: copies of the model trained on for each fork's budget,
    plainly (``continue-<steps>``) and with its slice oversampled (``oversample-<fork>``)."""


class Merge(CommandBase):
    """Merge ``forks`` into the paused model by ``method``; the merged weights are loaded into
    the run's model and training resumes from them (docs/forks.md). ``discard_merge`` undoes it
    while still paused."""

    type: Literal["merge"] = "merge"
    method: MergeMethod
    forks: list[ForkName] = Field(min_length=1, max_length=32)
    name: ForkName | None = None
    """Default ``merge-<n>``."""
    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None
    """``soup``: one weight per model (the parent first, then ``forks``); ``adapter``: one per
    fork. Default: chosen on validation from a small grid (docs/forks.md)."""
    optimizer: Literal["keep", "reset"] = "keep"
    """The run's optimizer state after the merge: kept as it is, or emptied."""
    steps: int = Field(default=100, ge=1, le=1_000_000)
    """``distill``: optimizer steps."""
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """``distill``: learning rate (default: the run's current one)."""
    temperature: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """``distill``: softmax temperature (default: chosen on validation from a grid)."""
    strength: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """``distill``: the weight of the distillation loss (default: chosen with the
    temperature)."""
    tolerance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """How much worse than the parent's on validation (relative to its error rate for class
    targets, else its loss) the merge may be and still be applied."""
    force: bool = False
    """Apply the merge even when it is worse than the parent beyond ``tolerance``."""
    rest_max: int = Field(default=10_000, ge=1, le=100_000_000)
    """Samples of the rest of the training set used by the report (and by ``fisher`` and
    ``distill``)."""

    @model_validator(mode="after")
    def _options_apply(self) -> Merge:
        if self.weights is not None and self.method not in ("soup", "adapter"):
            raise ValueError(f"weights apply to soup and adapter merges, not {self.method!r}")
        distilling = self.temperature is not None or self.strength is not None
        if distilling and self.method != "distill":
            raise ValueError(f"temperature and strength apply to distill, not {self.method!r}")
        return self


class DiscardMerge(CommandBase):
    """Undo the latest merge while the run is still paused: weights and optimizer state back."""

    type: Literal["discard_merge"] = "discard_merge"


class ShowLineage(CommandBase):
    """The lineage of the session's models: nodes, edges and the active node."""

    type: Literal["lineage"] = "lineage"


Command = Annotated[
    Subscribe
    | Unsubscribe
    | History
    | Status
    | Ping
    | Pause
    | Resume
    | Stop
    | RunTest
    | RunHealth
    | SetHparams
    | Export
    | Import
    | Checkpoints
    | Restore
    | TakeSnapshot
    | Scan
    | Cancel
    | Histogram
    | Quantiles
    | Select
    | Selections
    | SelectionRows
    | ExportSelection
    | DataMap
    | Explorer
    | SamplePreview
    | Fork
    | Forks
    | Compare
    | Merge
    | DiscardMerge
    | ShowLineage,
    Field(discriminator="type"),
]

# --------------------------------------------------------------------------- command replies
#
# The ``data`` of the ``reply`` to each command type (:data:`REPLIES`). A reply carries no tag
# of its own: its command's ``type`` says which model it is. Optional fields with a default
# are left out of the wire when the reply does not set them (a cancelled scan says only
# ``split`` and ``cancelled``).


class ReplyData(Message):
    """Base of the replies' data models: a field with a default may be absent on the wire."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)


def reply_fields(data: Message) -> dict[str, Any]:
    """A reply's data as sent: fields left at their default and never set are omitted.

    Example:
        >>> reply_fields(CancelReply(cancelled=True, fork="hard"))
        {'cancelled': True, 'fork': 'hard'}
    """
    fields = type(data).model_fields
    unset = {name for name, f in fields.items() if not f.is_required()} - data.model_fields_set
    return data.model_dump(exclude=unset)


class SubscribeReply(ReplyData):
    """``snapshot``: a ``snapshot`` frame follows; ``replay``: the events after ``since`` do."""

    mode: Literal["snapshot", "replay"]
    seq: int


class SeqReply(ReplyData):
    """The ``seq`` of the latest stream event (``unsubscribe``)."""

    seq: int


class PingReply(ReplyData):
    time: FiniteFloat
    seq: int


class StatusReply(ReplyData):
    """Every run of the session, and the state of the one asked about (``run``)."""

    runs: list[RunInfo]
    seq: int
    run: str
    state: RunState
    step: int
    epoch: int
    latest: Metrics
    alerts: list[AlertKind]


class HistoryReply(ReplyData):
    run: str
    split: Split
    metric: str
    series: Series


class Position(ReplyData):
    """Where the run is when the command took effect (``pause``)."""

    state: RunState | Literal["stopping"]
    """``stopping``: the run ends after this boundary (``stop``)."""
    step: int
    epoch: int


class ResumeReply(Position):
    max_epochs: int | None
    """The epoch limit now in force (``-1``: none)."""
    max_steps: int | None
    after_end: dict[str, int] | None = None
    """An extension waiting for the planned end, if any: ``{"epochs": n}`` and/or
    ``{"steps": n}``."""


class StopReply(Position):
    stopping: bool


class SetReply(ReplyData):
    step: int
    changes: list[HparamEdit]


class ExportReply(ReplyData):
    """The written session file: its absolute ``path`` and ``size`` in bytes."""

    path: str | None = None
    size: int | None = None
    step: int | None = None
    epoch: int | None = None


class LoadReply(Position):
    """What ``import`` or ``restore`` loaded into the paused run."""

    loaded: str
    """The session file or checkpoint, in words."""
    loaded_step: int
    loaded_epoch: int


class CheckpointEntry(ReplyData):
    """One snapshot of the checkpoint ring (``snapshot`` replies with the new one)."""

    id: str
    step: int
    epoch: int
    reason: str
    time: FiniteFloat
    size: int


class CheckpointsReply(ReplyData):
    checkpoints: list[CheckpointEntry]
    capacity: int
    max_bytes: int


class QueryHeader(ReplyData):
    """Where a per-sample answer's numbers come from."""

    split: Split
    source: SampleSource
    step: int


class LossSummary(ReplyData):
    """Size and loss range of a set of samples."""

    size: int
    loss_mean: float | None
    loss_min: float | None
    loss_max: float | None


class Cancelled(ReplyData):
    """A scan, comparison or merge stopped by ``cancel`` before it finished."""

    cancelled: Literal[True]
    split: Split | None = None
    """A scan: its split."""
    name: str | None = None
    """A merge: its name."""


class ScanReply(QueryHeader):
    """The scanned split: its size and loss range, and how fast it went."""

    cancelled: Literal[False]
    duration: float
    samples_per_s: float | None
    size: int
    loss_mean: float | None
    loss_min: float | None
    loss_max: float | None


class CancelReply(ReplyData):
    """Whether something was running, and what it was."""

    cancelled: bool
    split: Split | None = None
    """A scan of this split."""
    fork: str | None = None
    merge: str | None = None
    compare: bool | None = None


class HistogramReply(QueryHeader):
    edges: list[float]
    """``len(counts) + 1`` increasing bin edges."""
    counts: list[int]
    total: int
    below: int
    above: int
    missing: int
    """Samples without a finite loss."""
    min: float | None
    max: float | None
    mean: float | None


class QuantilesReply(QueryHeader):
    q: list[float]
    values: list[float | None]
    count: int
    mean: float | None


class SampleRow(Message):
    """One sample's current statistics (``None``: not known)."""

    index: int
    loss: float | None
    confidence: float | None
    variability: float | None
    correct: float | None
    margin: float | None
    count: int
    label: float | None


class ClusterInfo(Message):
    cluster: int
    size: int
    loss_mean: float | None


class SelectionSummary(ReplyData):
    """A named selection, without its ids."""

    name: str
    split: Split
    source: SampleSource
    step: int
    criterion: dict[str, Any]
    size: int
    created: FiniteFloat


class SelectReply(SelectionSummary):
    loss_mean: float | None
    loss_min: float | None
    loss_max: float | None
    preview: list[SampleRow]
    """The selection's 20 highest-loss samples."""
    threshold: float | None = None
    """``quantile``: the loss at the quantile."""
    clusters: list[ClusterInfo] | None = None
    """``clusters``: every cluster of the k-means, by loss."""


class SelectionsReply(ReplyData):
    selections: list[SelectionSummary]


class RowsReply(ReplyData):
    name: str
    total: int
    offset: int
    rows: list[SampleRow]


class ExportSelectionReply(ReplyData):
    name: str
    path: str
    rows: int
    format: Literal["csv", "parquet", "json"]
    bytes: int


class DataMapReply(QueryHeader):
    """Columns aligned by sample (a subsample of ``total``)."""

    total: int
    index: list[int]
    confidence: list[float | None]
    variability: list[float | None]
    correct: list[float | None]
    loss: list[float | None]


class ExplorerReply(QueryHeader):
    method: Literal["umap", "pca"]
    total: int
    index: list[int]
    x: list[float | None]
    y: list[float | None]
    loss: list[float | None]


class SamplePreviewReply(ReplyData):
    split: Split
    previews: list[dict[str, Any]]
    """One per index asked for: ``{index, kind, ...}`` (``image``, ``text``, ``tensor`` or
    ``error``)."""


class ForkSummary(ReplyData):
    """One fork of the session (``forks``), without its indices."""

    name: str
    run: str
    parent: str
    parent_step: int
    selection: dict[str, Any]
    budget: dict[str, int]
    hparams: dict[str, Any]
    status: ForkState
    steps: int
    duration: float
    slice_loss: float | None
    parent_slice_loss: float | None
    message: str | None
    has_weights: bool
    created: FiniteFloat
    warnings: list[str]


class ForkReply(ForkSummary, Position):
    """The fork's record when it ended (``status``) and where the parent run is."""


class ForksReply(ReplyData):
    forks: list[ForkSummary]


class CompareTarget(Message):
    """A set of samples the models are scored on: a fork's slice, the rest, validation."""

    name: str
    kind: str
    split: Split
    samples: int


class Scores(Message):
    """A model's mean loss and accuracy on each target, aligned with the targets."""

    loss: list[float | None]
    accuracy: list[float | None]


class CompareRow(Scores):
    model: str
    run: str | None
    """The model's run; ``None`` for a baseline (trained for the comparison only)."""
    kind: str
    """``main``, ``fork``, ``merge`` or a baseline (``continue``, ``oversample``)."""
    fork: str | None = None
    """A baseline: the fork whose budget (and, oversampled, slice) it was trained with."""
    steps: int | None = None
    """A baseline: the optimizer steps it was trained for."""


class CompareReply(ReplyData):
    """The comparison table: one row per model, its scores aligned with ``targets``."""

    cancelled: Literal[False]
    step: int
    targets: list[CompareTarget]
    rows: list[CompareRow]
    notes: list[str]
    """Why some baselines are missing, if any."""
    duration: float


class MergeReply(Position):
    """The merge's report: the scores before and after on each target, and whether the
    merged weights replaced the run's."""

    name: str
    run: str | None
    """The merge's run; ``None`` when it was not applied."""
    method: MergeMethod
    forks: list[str]
    kept: list[str] | None
    """``greedy``: the models kept."""
    choice: dict[str, Any]
    """The options chosen on validation (weights, temperature, strength)."""
    grid: list[dict[str, Any]]
    optimizer: Literal["keep", "reset"]
    targets: list[CompareTarget]
    before: Scores
    after: Scores
    distill: dict[str, float] | None
    applied: bool
    reason: str | None = None
    """Why it was not applied."""
    gate: dict[str, Any]
    duration: float


class DiscardReply(Position):
    name: str
    run: str
    active: str
    """The node active again."""


REPLIES: dict[str, type[Message] | UnionType] = {
    "subscribe": SubscribeReply,
    "unsubscribe": SeqReply,
    "history": HistoryReply,
    "status": StatusReply,
    "ping": PingReply,
    "pause": Position,
    "resume": ResumeReply,
    "stop": StopReply,
    "test": TestOutcome,
    "health": HealthOutcome,
    "set": SetReply,
    "export": ExportReply,
    "import": LoadReply,
    "checkpoints": CheckpointsReply,
    "restore": LoadReply,
    "snapshot": CheckpointEntry,
    "scan": ScanReply | Cancelled,
    "cancel": CancelReply,
    "histogram": HistogramReply,
    "quantiles": QuantilesReply,
    "select": SelectReply,
    "selections": SelectionsReply,
    "selection_rows": RowsReply,
    "export_selection": ExportSelectionReply,
    "data_map": DataMapReply,
    "explorer": ExplorerReply,
    "sample_preview": SamplePreviewReply,
    "fork": ForkReply,
    "forks": ForksReply,
    "compare": CompareReply | Cancelled,
    "merge": MergeReply | Cancelled,
    "discard_merge": DiscardReply,
    "lineage": LineageView,
}
"""The model of each command's reply data, by command ``type`` (a scan, comparison or merge
may instead answer :class:`Cancelled`)."""


SAMPLE_COMMANDS = frozenset(
    {"scan", "cancel", "histogram", "quantiles", "select", "selections", "selection_rows"}
    | {"export_selection", "data_map", "explorer", "sample_preview"}
)
"""Per-sample commands: answered on the training thread, which owns the per-sample data."""

FORK_COMMANDS = frozenset({"fork", "forks", "compare", "merge", "discard_merge", "lineage"})
"""Fork and merge commands: they run models, so on the training thread."""

CONTROL_COMMANDS = SAMPLE_COMMANDS | frozenset(
    {"pause", "resume", "stop", "test", "health", "set"}
    | {"export", "import", "checkpoints", "restore", "snapshot"}
    | FORK_COMMANDS
)
"""Commands that act on the model and therefore run on the training thread."""

EXCLUSIVE_COMMANDS = frozenset({"test", "health", "export", "scan"})
"""Control commands of which one at a time may be waiting or running per run: the server
answers a second one of the same type ``busy`` until the first is answered."""

SERVER_MESSAGE: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)
CLIENT_COMMAND: TypeAdapter[Command] = TypeAdapter(Command)
