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

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

PROTOCOL_VERSION: Final = 1
"""Bumped on any incompatible change of the messages below."""

MAX_FRAME_BYTES = 1 << 20
"""Largest client frame the server accepts (1 MiB); larger ones get ``frame_too_large``."""

RunState = Literal["running", "paused", "testing", "finished"]
Split = Literal["train", "val", "test"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
Metrics = dict[str, float | None]
HealthCheck = Literal["determinism", "gradients", "instability", "activations", "throughput"]
Severity = Literal["info", "warning", "error"]
HparamName = Literal["lr", "weight_decay", "momentum", "betas"]
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
    "file_error",  # a session file could not be written or read (the message says why)
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


class Series(Message):
    """A metric's points, in step order. Decimated series keep each bucket's min and max."""

    steps: list[int]
    values: list[float | None]
    decimated: bool = False


class LogRecord(Message):
    """A forwarded Python ``logging`` record or warning."""

    time: FiniteFloat
    level: LogLevel
    logger: str
    message: str


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


class RunSnapshot(RunInfo):
    """A run with its history, as sent in a snapshot."""

    series: dict[str, Series] = Field(default_factory=dict)
    epoch_starts: list[int] = Field(default_factory=list)
    hparam_changes: list[HparamChange] = Field(default_factory=list)
    health: list[HealthResult] = Field(default_factory=list)
    """The latest result of each health check."""


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


class EventBase(Message):
    """Envelope of every stream event."""

    v: Literal[1] = PROTOCOL_VERSION
    session: str
    run: str
    seq: int = Field(ge=1)
    time: FiniteFloat


class RunStarted(EventBase):
    type: Literal["run_started"] = "run_started"
    info: RunInfo


class StatusChanged(EventBase):
    type: Literal["status"] = "status"
    state: RunState
    step: int
    epoch: int
    reason: str | None = None


class MetricsEvent(EventBase):
    """Values for one step of one split (``train`` per optimizer step; ``val``/``test`` per run)."""

    type: Literal["metrics"] = "metrics"
    split: Split = "train"
    step: int
    epoch: int
    values: Metrics


class EpochEvent(EventBase):
    """An epoch boundary: ``step`` is the first step of epoch ``epoch``."""

    type: Literal["epoch"] = "epoch"
    epoch: int
    step: int


class RuntimeEvent(EventBase):
    """Runtime stats sampled about once a second (never per step)."""

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


class LogEvent(EventBase):
    type: Literal["log"] = "log"
    record: LogRecord


class TestResult(EventBase):
    """One evaluation of the test loader, labelled ``test_1``, ``test_2``, …"""

    __test__ = False  # not a pytest test class
    type: Literal["test_result"] = "test_result"
    label: str
    step: int
    loss: float | None
    metrics: Metrics
    duration: FiniteFloat


class HealthResult(EventBase):
    """The findings of one health check (``health`` command), run at a batch boundary."""

    type: Literal["health_result"] = "health_result"
    check: HealthCheck
    step: int
    findings: list[Finding]
    duration: FiniteFloat


class HparamChange(EventBase):
    """One hyperparameter of one param group changed by the ``set`` command (a chart marker)."""

    type: Literal["hparam_change"] = "hparam_change"
    step: int
    optimizer: int
    group: int
    name: HparamName
    old: HparamValue | None
    new: HparamValue


class ScanProgress(EventBase):
    """Progress of a ``scan``: ``running`` while it goes, then ``done`` or ``cancelled``."""

    type: Literal["scan_progress"] = "scan_progress"
    split: Split
    state: Literal["running", "done", "cancelled"]
    done: int = Field(ge=0)
    """Samples evaluated so far."""
    total: int | None = None
    """Samples in the split, when known."""
    elapsed: FiniteFloat


EventModel = (
    RunStarted
    | StatusChanged
    | MetricsEvent
    | EpochEvent
    | RuntimeEvent
    | LogEvent
    | TestResult
    | HealthResult
    | HparamChange
    | ScanProgress
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

    Only telemetry (``metrics``, ``runtime``, ``log``) is ever skipped; the full history stays
    available through the ``history`` command.
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
    RunStarted
    | StatusChanged
    | MetricsEvent
    | EpochEvent
    | RuntimeEvent
    | LogEvent
    | TestResult
    | HealthResult
    | HparamChange
    | ScanProgress
    | Hello
    | Batch
    | Snapshot
    | Coalesced
    | Reply
    | ErrorReply,
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
    values are rescaled).
    """

    type: Literal["set"] = "set"
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    weight_decay: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    momentum: float | None = Field(default=None, ge=0, lt=1)
    betas: tuple[Beta, Beta] | None = None
    group: int | None = Field(default=None, ge=0)
    optimizer: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _something_to_set(self) -> SetHparams:
        values = (self.lr, self.weight_decay, self.momentum, self.betas)
        if all(value is None for value in values):
            raise ValueError("nothing to set; expected lr, weight_decay, momentum or betas")
        return self


SessionPath = Annotated[str, Field(min_length=1, max_length=4096)]
"""A file path on the training process's machine (absolute, or relative to its directory)."""


class Export(CommandBase):
    """Write the whole session to a ``.otf`` file at the next boundary (see docs/sessions.md)."""

    type: Literal["export"] = "export"
    path: SessionPath


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
    """Cancel the scan in progress (the reply says whether there was one)."""

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


class Select(SampleQuery):
    """Make a named selection of samples by exactly one criterion: ``top``, a loss range
    (``loss_min`` / ``loss_max``), ``quantile``, ``region`` or ``clusters``."""

    type: Literal["select"] = "select"
    name: SelectionName | None = None
    top: int | None = Field(default=None, ge=1)
    loss_min: FiniteFloat | None = None
    loss_max: FiniteFloat | None = None
    quantile: float | None = Field(default=None, gt=0, lt=1)
    """Samples whose loss is at or above this quantile."""
    region: Literal["easy", "ambiguous", "hard"] | None = None
    fraction: float = Field(default=1 / 3, gt=0, le=1)
    """Share of the samples a data-map region takes."""
    clusters: int | None = Field(default=None, ge=2, le=100)
    """k of a k-means over per-sample features; ``cluster`` picks one (0: highest loss)."""
    cluster: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _one_criterion(self) -> Select:
        given = [
            self.top is not None,
            self.loss_min is not None or self.loss_max is not None,
            self.quantile is not None,
            self.region is not None,
            self.clusters is not None,
        ]
        if sum(given) != 1:
            raise ValueError(
                "expected exactly one criterion: top, loss_min/loss_max, quantile, region or "
                "clusters"
            )
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
    | Explorer,
    Field(discriminator="type"),
]

SAMPLE_COMMANDS = frozenset(
    {"scan", "cancel", "histogram", "quantiles", "select", "selections", "selection_rows"}
    | {"export_selection", "data_map", "explorer"}
)
"""Per-sample commands: answered on the training thread, which owns the per-sample data."""

CONTROL_COMMANDS = SAMPLE_COMMANDS | frozenset(
    {"pause", "resume", "stop", "test", "health", "set"}
    | {"export", "import", "checkpoints", "restore", "snapshot"}
)
"""Commands that act on the model and therefore run on the training thread."""

EXCLUSIVE_COMMANDS = frozenset({"test", "health", "export", "scan"})
"""Control commands of which one at a time may be waiting or running per run: the server
answers a second one of the same type ``busy`` until the first is answered."""

SERVER_MESSAGE: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)
CLIENT_COMMAND: TypeAdapter[Command] = TypeAdapter(Command)
