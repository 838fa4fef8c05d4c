/* eslint-disable */
/**
 * Wire types of the OnTheFly protocol — generated, do not edit.
 *
 * Source: extension/protocol.schema.json (from onthefly/protocol.py).
 * Regenerate: `cd extension && npm run gen-types`.
 */

/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Command".
 */
export type Command =
  Subscribe | Unsubscribe | History | Status | Ping | Pause | Resume | Stop | RunTest;
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ServerMessage".
 */
export type ServerMessage =
  | RunStarted
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
  | ErrorReply;

export interface OnTheFlyProtocol {
  [k: string]: unknown | undefined;
}
/**
 * Several stream events in one frame, in ``seq`` order.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Batch".
 */
export interface Batch {
  events: (
    RunStarted | StatusChanged | MetricsEvent | EpochEvent | RuntimeEvent | LogEvent | TestResult
  )[];
  type: 'batch';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunStarted".
 */
export interface RunStarted {
  info: RunInfo;
  run: string;
  seq: number;
  session: string;
  time: number;
  type: 'run_started';
  v: 1;
}
/**
 * What a client needs to know about one run of the session.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunInfo".
 */
export interface RunInfo {
  epoch: number;
  latest: {
    [k: string]: number | null | undefined;
  };
  name: string;
  parent: string | null;
  project: string;
  run: string;
  started_at: number;
  state: 'running' | 'paused' | 'testing' | 'finished';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "StatusChanged".
 */
export interface StatusChanged {
  epoch: number;
  reason: string | null;
  run: string;
  seq: number;
  session: string;
  state: 'running' | 'paused' | 'testing' | 'finished';
  step: number;
  time: number;
  type: 'status';
  v: 1;
}
/**
 * Values for one step of one split (``train`` per optimizer step; ``val``/``test`` per run).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "MetricsEvent".
 */
export interface MetricsEvent {
  epoch: number;
  run: string;
  seq: number;
  session: string;
  split: 'train' | 'val' | 'test';
  step: number;
  time: number;
  type: 'metrics';
  v: 1;
  values: {
    [k: string]: number | null | undefined;
  };
}
/**
 * An epoch boundary: ``step`` is the first step of epoch ``epoch``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "EpochEvent".
 */
export interface EpochEvent {
  epoch: number;
  run: string;
  seq: number;
  session: string;
  step: number;
  time: number;
  type: 'epoch';
  v: 1;
}
/**
 * Runtime stats sampled about once a second (never per step).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RuntimeEvent".
 */
export interface RuntimeEvent {
  cpu_percent: number | null;
  cuda_allocated: number | null;
  cuda_reserved: number | null;
  data_wait: number | null;
  gpus: GpuStats[];
  rss_bytes: number | null;
  run: string;
  samples_per_s: number | null;
  seq: number;
  session: string;
  step: number;
  step_time: number | null;
  time: number;
  type: 'runtime';
  v: 1;
}
/**
 * One GPU as NVML sees it; fields NVML cannot read are ``None``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "GpuStats".
 */
export interface GpuStats {
  index: number;
  memory_total: number | null;
  memory_used: number | null;
  name: string;
  power_watts: number | null;
  temperature: number | null;
  utilization: number | null;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LogEvent".
 */
export interface LogEvent {
  record: LogRecord;
  run: string;
  seq: number;
  session: string;
  time: number;
  type: 'log';
  v: 1;
}
/**
 * A forwarded Python ``logging`` record or warning.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LogRecord".
 */
export interface LogRecord {
  level: 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR' | 'CRITICAL';
  logger: string;
  message: string;
  time: number;
}
/**
 * One evaluation of the test loader, labelled ``test_1``, ``test_2``, …
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "TestResult".
 */
export interface TestResult {
  duration: number;
  label: string;
  loss: number | null;
  metrics: {
    [k: string]: number | null | undefined;
  };
  run: string;
  seq: number;
  session: string;
  step: number;
  time: number;
  type: 'test_result';
  v: 1;
}
/**
 * This client fell behind: telemetry events in ``[from_seq, to_seq]`` were skipped.
 *
 * Only telemetry (``metrics``, ``runtime``, ``log``) is ever skipped; the full history stays
 * available through the ``history`` command.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Coalesced".
 */
export interface Coalesced {
  dropped: number;
  from_seq: number;
  to_seq: number;
  type: 'coalesced';
}
/**
 * Start the live stream: a ``snapshot`` (or, with ``since``, the missed events) comes first.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Subscribe".
 */
export interface Subscribe {
  id: string;
  max_points?: number | null;
  run?: string | null;
  since?: number | null;
  type: 'subscribe';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Unsubscribe".
 */
export interface Unsubscribe {
  id: string;
  run?: string | null;
  type: 'unsubscribe';
}
/**
 * A metric's series between steps ``start`` and ``end`` (inclusive), min/max-decimated.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "History".
 */
export interface History {
  end?: number | null;
  id: string;
  max_points?: number;
  metric: string;
  run?: string | null;
  split?: 'train' | 'val' | 'test';
  start?: number | null;
  type: 'history';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Status".
 */
export interface Status {
  id: string;
  run?: string | null;
  type: 'status';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Ping".
 */
export interface Ping {
  id: string;
  run?: string | null;
  type: 'ping';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Pause".
 */
export interface Pause {
  id: string;
  run?: string | null;
  type: 'pause';
}
/**
 * Resume a paused run; ``epochs``/``steps`` extend a run that reached its stop condition.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Resume".
 */
export interface Resume {
  epochs?: number | null;
  id: string;
  run?: string | null;
  steps?: number | null;
  type: 'resume';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Stop".
 */
export interface Stop {
  id: string;
  run?: string | null;
  type: 'stop';
}
/**
 * Evaluate the test loader at the next boundary.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunTest".
 */
export interface RunTest {
  id: string;
  label?: string | null;
  run?: string | null;
  type: 'test';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ErrorInfo".
 */
export interface ErrorInfo {
  code:
    | 'bad_json'
    | 'bad_message'
    | 'unknown_type'
    | 'frame_too_large'
    | 'rate_limited'
    | 'unknown_run'
    | 'invalid_state'
    | 'busy'
    | 'session_closed'
    | 'unsupported'
    | 'internal';
  message: string;
}
/**
 * The failed answer to the command ``id`` (``None`` when the frame had no readable id).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ErrorReply".
 */
export interface ErrorReply {
  error: ErrorInfo;
  id: string | null;
  type: 'error';
}
/**
 * First frame on every connection.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Hello".
 */
export interface Hello {
  max_frame_bytes: number;
  project: string;
  server: string;
  session: string;
  time: number;
  type: 'hello';
  v: 1;
}
/**
 * The successful answer to the command ``id``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Reply".
 */
export interface Reply {
  data: {
    [k: string]: unknown | undefined;
  };
  id: string;
  type: 'reply';
}
/**
 * A run with its history, as sent in a snapshot.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunSnapshot".
 */
export interface RunSnapshot {
  epoch: number;
  epoch_starts: number[];
  latest: {
    [k: string]: number | null | undefined;
  };
  name: string;
  parent: string | null;
  project: string;
  run: string;
  series: {
    [k: string]: Series | undefined;
  };
  started_at: number;
  state: 'running' | 'paused' | 'testing' | 'finished';
  step: number;
}
/**
 * A metric's points, in step order. Decimated series keep each bucket's min and max.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Series".
 */
export interface Series {
  decimated: boolean;
  steps: number[];
  values: (number | null)[];
}
/**
 * State of every run up to and including stream event ``seq``; live events follow.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Snapshot".
 */
export interface Snapshot {
  logs: LogRecord[];
  runs: RunSnapshot[];
  seq: number;
  session: string;
  time: number;
  type: 'snapshot';
  v: 1;
}
