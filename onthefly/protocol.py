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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

PROTOCOL_VERSION: Final = 1
"""Bumped on any incompatible change of the messages below."""

MAX_FRAME_BYTES = 1 << 20
"""Largest client frame the server accepts (1 MiB); larger ones get ``frame_too_large``."""

RunState = Literal["running", "paused", "testing", "finished"]
Split = Literal["train", "val", "test"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
Metrics = dict[str, float | None]
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


class ErrorInfo(Message):
    code: ErrorCode
    message: str


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


Event = Annotated[
    RunStarted | StatusChanged | MetricsEvent | EpochEvent | RuntimeEvent | LogEvent | TestResult,
    Field(discriminator="type"),
]


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


Command = Annotated[
    Subscribe | Unsubscribe | History | Status | Ping | Pause | Resume | Stop | RunTest,
    Field(discriminator="type"),
]

CONTROL_COMMANDS = frozenset({"pause", "resume", "stop", "test"})
"""Commands that act on the model and therefore run on the training thread."""

SERVER_MESSAGE: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)
CLIENT_COMMAND: TypeAdapter[Command] = TypeAdapter(Command)
