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
  | Subscribe
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
  | ShowLineage;
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ServerMessage".
 */
export type ServerMessage =
  | RunStarted
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
 * Something in the run needs a look: ``raised`` when it happens, ``cleared`` when it no
 * longer holds (a finite loss again, steps again; a spike clears itself after a quiet
 * stretch). Detected from the values the run already ships, never with a host sync.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Alert".
 */
export interface Alert {
  details: {
    [k: string]: unknown | undefined;
  };
  kind:
    'nonfinite_loss' | 'nonfinite_grad' | 'loss_spike' | 'stalled' | 'loader_crashed' | 'crashed';
  message: string;
  run: string;
  seq: number;
  session: string;
  severity: 'info' | 'warning' | 'error';
  state: 'raised' | 'cleared';
  step: number;
  time: number;
  type: 'alert';
  v: 1;
}
/**
 * Several stream events in one frame, in ``seq`` order.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Batch".
 */
export interface Batch {
  events: (
    | RunStarted
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
  )[];
  type: 'batch';
}
/**
 * A new run of the session (the main run, a fork or a merge) and what is known of it.
 *
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
  alerts: (
    'nonfinite_loss' | 'nonfinite_grad' | 'loss_spike' | 'stalled' | 'loader_crashed' | 'crashed'
  )[];
  config: {
    [k: string]: number | string | boolean | null | undefined;
  };
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
 * The run's state changed (``reason`` says why), at ``step`` of ``epoch``.
 *
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
 * Consecutive optimizer steps of the training split at once, as columns: what ``metrics``
 * events would say one by one (a metric a step lacks has no point at that step). The
 * training loop ships its steps in batches; one event for a batch keeps the stream's cost
 * per step small (the Python client hands them out as ``metrics`` events).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "StepsEvent".
 */
export interface StepsEvent {
  /**
   * @minItems 1
   */
  epochs: [number, ...number[]];
  run: string;
  seq: number;
  session: string;
  split: 'train' | 'val' | 'test';
  /**
   * @minItems 1
   */
  steps: [number, ...number[]];
  time: number;
  type: 'steps';
  v: 1;
  values: {
    [k: string]: Points | undefined;
  };
}
/**
 * One metric's values at some of a batch's steps, in step order (``None``: NaN or
 * infinite, a gap).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Points".
 */
export interface Points {
  steps: number[];
  values: (number | null)[];
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
 * A forwarded Python ``logging`` record or warning of the training process.
 *
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
 * The findings of one health check (``health`` command), run at a batch boundary.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HealthResult".
 */
export interface HealthResult {
  check:
    'determinism' | 'gradients' | 'instability' | 'activations' | 'throughput' | 'distribution';
  duration: number;
  findings: Finding[];
  run: string;
  seq: number;
  session: string;
  step: number;
  time: number;
  type: 'health_result';
  v: 1;
}
/**
 * One observation of a health check: how bad, a one-line summary, and the numbers.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Finding".
 */
export interface Finding {
  check:
    'determinism' | 'gradients' | 'instability' | 'activations' | 'throughput' | 'distribution';
  details: {
    [k: string]: unknown | undefined;
  };
  severity: 'info' | 'warning' | 'error';
  summary: string;
}
/**
 * One hyperparameter of one param group changed by the ``set`` command (a chart marker).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HparamChange".
 */
export interface HparamChange {
  group: number;
  name: 'lr' | 'weight_decay' | 'momentum' | 'betas' | 'eps';
  new: number | number[];
  old: number | number[] | null;
  optimizer: number;
  run: string;
  seq: number;
  session: string;
  step: number;
  time: number;
  type: 'hparam_change';
  v: 1;
}
/**
 * An accepted ``set`` under which the optimizer's next step failed: the edit was rolled
 * back, that step's update not applied, and the run paused (its ``status`` says why).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HparamError".
 */
export interface HparamError {
  message: string;
  optimizer: number;
  rolled_back: RolledBack[];
  run: string;
  seq: number;
  session: string;
  step: number;
  time: number;
  type: 'hparam_error';
  v: 1;
}
/**
 * One hyperparameter of one param group an ``hparam_error`` put back.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RolledBack".
 */
export interface RolledBack {
  group: number;
  name: 'lr' | 'weight_decay' | 'momentum' | 'betas' | 'eps';
  rejected: number | number[];
  restored: number | number[] | null;
}
/**
 * Progress of a ``scan``: ``running`` while it goes, then ``done`` or ``cancelled``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ScanProgress".
 */
export interface ScanProgress {
  done: number;
  elapsed: number;
  run: string;
  seq: number;
  session: string;
  split: 'train' | 'val' | 'test';
  state: 'running' | 'done' | 'cancelled';
  time: number;
  total: number | null;
  type: 'scan_progress';
  v: 1;
}
/**
 * Progress of a fork's training (``fork``), on the fork's own run: ``running`` about every
 * 0.25 s, then ``done``, ``cancelled`` or ``failed`` (with ``message``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ForkProgress".
 */
export interface ForkProgress {
  elapsed: number;
  fork: string;
  loss: number | null;
  message: string | null;
  run: string;
  seq: number;
  session: string;
  state: 'running' | 'done' | 'cancelled' | 'failed';
  step: number;
  time: number;
  total: number | null;
  type: 'fork_progress';
  v: 1;
}
/**
 * The whole lineage, published on the main run whenever it changes (a fork starts or ends,
 * a merge is made or discarded).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LineageChanged".
 */
export interface LineageChanged {
  active: string;
  edges: LineageEdge[];
  nodes: LineageNode[];
  run: string;
  seq: number;
  session: string;
  time: number;
  type: 'lineage';
  v: 1;
}
/**
 * ``fork``: parent -> fork at the parent's ``step``; ``merge``: each source -> the merge.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LineageEdge".
 */
export interface LineageEdge {
  kind: 'fork' | 'merge';
  method: ('soup' | 'greedy' | 'fisher' | 'distill' | 'adapter') | null;
  source: string;
  step: number;
  target: string;
}
/**
 * One model of a session's lineage: the main run, a fork or a merge.
 *
 * A node's training metrics are the series of run ``metrics_run`` from step ``from_step``
 * on: a fork streams into a run of its own, a merge continues in the main run.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LineageNode".
 */
export interface LineageNode {
  budget: {
    [k: string]: number | undefined;
  } | null;
  from_step: number;
  hparams: {
    [k: string]: unknown | undefined;
  };
  kind: 'main' | 'fork' | 'merge';
  message: string | null;
  method: ('soup' | 'greedy' | 'fisher' | 'distill' | 'adapter') | null;
  metrics_run: string;
  name: string;
  parent: string | null;
  parent_slice_loss: number | null;
  parent_step: number | null;
  run: string;
  selection: {
    [k: string]: unknown | undefined;
  } | null;
  slice_loss: number | null;
  status: 'active' | 'superseded' | 'discarded' | 'running' | 'done' | 'cancelled' | 'failed';
  steps: number | null;
}
/**
 * The run's configuration, published as training starts: the optimizer and its
 * hyperparameters, batch size, limits, model size and the module's own hyperparameters
 * (Lightning's ``save_hyperparameters``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunConfig".
 */
export interface RunConfig {
  run: string;
  seq: number;
  session: string;
  time: number;
  type: 'config';
  v: 1;
  values: {
    [k: string]: number | string | boolean | null | undefined;
  };
}
/**
 * Cancel the scan, fork or merge in progress (the reply says whether there was one).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Cancel".
 */
export interface Cancel {
  id: string;
  run?: string | null;
  type: 'cancel';
}
/**
 * Whether something was running, and what it was.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CancelReply".
 */
export interface CancelReply {
  cancelled: boolean;
  compare?: boolean | null;
  fork?: string | null;
  merge?: string | null;
  split?: ('train' | 'val' | 'test') | null;
}
/**
 * A scan, comparison or merge stopped by ``cancel`` before it finished.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Cancelled".
 */
export interface Cancelled {
  cancelled: true;
  name?: string | null;
  split?: ('train' | 'val' | 'test') | null;
}
/**
 * One snapshot of the checkpoint ring (``snapshot`` replies with the new one).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CheckpointEntry".
 */
export interface CheckpointEntry {
  epoch: number;
  id: string;
  reason: string;
  size: number;
  step: number;
  time: number;
}
/**
 * List the run's checkpoint ring (id, step, epoch, reason, time, size).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Checkpoints".
 */
export interface Checkpoints {
  id: string;
  run?: string | null;
  type: 'checkpoints';
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CheckpointsReply".
 */
export interface CheckpointsReply {
  capacity: number;
  checkpoints: CheckpointEntry[];
  max_bytes: number;
}
/**
 * Wall-clock anchors of a run: at ``steps[i]`` it was ``times[i]`` (UNIX seconds). One
 * anchor per second of training at most, so a step's time is interpolated between two.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Clock".
 */
export interface Clock {
  steps: number[];
  times: number[];
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ClusterInfo".
 */
export interface ClusterInfo {
  cluster: number;
  loss_mean: number | null;
  size: number;
}
/**
 * This client fell behind: telemetry events in ``[from_seq, to_seq]`` were skipped.
 *
 * Only telemetry (``metrics``, ``steps``, ``runtime``, ``log``) is ever skipped; the full
 * history stays available through the ``history`` command.
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
  relay?: boolean;
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
 * Run one health check at the next boundary; the reply and a ``health_result`` hold its
 * findings.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RunHealth".
 */
export interface RunHealth {
  check:
    'determinism' | 'gradients' | 'instability' | 'activations' | 'throughput' | 'distribution';
  id: string;
  run?: string | null;
  type: 'health';
}
/**
 * Change optimizer hyperparameters at the next boundary (every group unless ``group``).
 *
 * Each change is published as an ``hparam_change`` event; a scheduler keeps it (its base
 * values are rescaled). Values are checked against the parameters' dtype before anything
 * changes (``unsupported`` otherwise); should the optimizer still fail under an accepted
 * edit, the edit is rolled back and the run paused (``hparam_error``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SetHparams".
 */
export interface SetHparams {
  betas?: [unknown, unknown] | null;
  eps?: number | null;
  group?: number | null;
  id: string;
  lr?: number | null;
  momentum?: number | null;
  optimizer?: number;
  run?: string | null;
  type: 'set';
  weight_decay?: number | null;
}
/**
 * Write the whole session to a ``.otf`` file at the next boundary (see docs/sessions.md).
 *
 * A file already at ``path`` is refused (``file_error``) unless ``overwrite``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Export".
 */
export interface Export {
  id: string;
  overwrite?: boolean;
  path: string;
  run?: string | null;
  type: 'export';
}
/**
 * Load a session file's model, optimizer, scheduler and scaler state into a paused run.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Import".
 */
export interface Import {
  id: string;
  path: string;
  run?: string | null;
  type: 'import';
}
/**
 * Load checkpoint ``checkpoint``'s model, optimizer, scheduler and scaler into a paused run.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Restore".
 */
export interface Restore {
  checkpoint: string;
  id: string;
  run?: string | null;
  type: 'restore';
}
/**
 * Add a snapshot of the run to its checkpoint ring now.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "TakeSnapshot".
 */
export interface TakeSnapshot {
  id: string;
  run?: string | null;
  type: 'snapshot';
}
/**
 * Evaluate every sample of a split with the current model (at the next boundary).
 *
 * Progress comes as ``scan_progress`` events; the reply summarises the pass.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Scan".
 */
export interface Scan {
  id: string;
  run?: string | null;
  split?: 'train' | 'val' | 'test';
  type: 'scan';
}
/**
 * The per-sample loss histogram of a split: ``bins`` equal bins over [``min``, ``max``].
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Histogram".
 */
export interface Histogram {
  bins?: number;
  id: string;
  max?: number | null;
  min?: number | null;
  run?: string | null;
  source?: ('training' | 'scan') | null;
  split?: 'train' | 'val' | 'test';
  type: 'histogram';
}
/**
 * Quantiles of the per-sample losses of a split.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Quantiles".
 */
export interface Quantiles {
  id: string;
  /**
   * @minItems 1
   * @maxItems 1000
   */
  q?: [number, ...number[]];
  run?: string | null;
  source?: ('training' | 'scan') | null;
  split?: 'train' | 'val' | 'test';
  type: 'quantiles';
}
/**
 * Make a named selection of samples by exactly one criterion: ``top``, a loss range
 * (``loss_min`` / ``loss_max``), ``quantile``, ``region``, a data-map box
 * (``confidence_min`` … ``variability_max``) or ``clusters``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Select".
 */
export interface Select {
  cluster?: number;
  clusters?: number | null;
  confidence_max?: number | null;
  confidence_min?: number | null;
  fraction?: number | null;
  id: string;
  loss_max?: number | null;
  loss_min?: number | null;
  name?: string | null;
  quantile?: number | null;
  region?: ('easy' | 'ambiguous' | 'hard' | 'mislabeled') | null;
  run?: string | null;
  size?: number | null;
  source?: ('training' | 'scan') | null;
  split?: 'train' | 'val' | 'test';
  top?: number | null;
  type: 'select';
  variability_max?: number | null;
  variability_min?: number | null;
  with_correctness?: boolean;
}
/**
 * The run's selections (names, criteria, sizes).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Selections".
 */
export interface Selections {
  id: string;
  run?: string | null;
  type: 'selections';
}
/**
 * A page of a selection's samples with their current statistics, sorted.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SelectionRows".
 */
export interface SelectionRows {
  descending?: boolean;
  id: string;
  limit?: number;
  name: string;
  offset?: number;
  run?: string | null;
  sort?: 'loss' | 'index' | 'confidence' | 'variability' | 'correct' | 'margin' | 'count' | 'label';
  type: 'selection_rows';
}
/**
 * Write a selection's samples to ``directory``/``file`` (default ``<name>.<format>``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ExportSelection".
 */
export interface ExportSelection {
  directory: string;
  file?: string | null;
  format?: 'csv' | 'parquet' | 'json';
  id: string;
  name: string;
  overwrite?: boolean;
  run?: string | null;
  type: 'export_selection';
}
/**
 * Confidence and variability per sample (the data map), subsampled to ``max_points``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "DataMap".
 */
export interface DataMap {
  id: string;
  max_points?: number;
  run?: string | null;
  split?: 'train' | 'val' | 'test';
  type: 'data_map';
}
/**
 * A 2-D projection (UMAP, else PCA) of a scanned split's embeddings, with losses.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Explorer".
 */
export interface Explorer {
  id: string;
  max_points?: number;
  method?: 'auto' | 'umap' | 'pca';
  run?: string | null;
  split?: 'train' | 'val' | 'test';
  type: 'explorer';
}
/**
 * What some samples of a split are, for the dashboard to show: a thumbnail of an
 * image-like input (1-4 channels), the text or image of the run's ``describe_sample`` hook,
 * or a compact summary of the tensor. At most 64 samples, each at most ``size`` pixels.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SamplePreview".
 */
export interface SamplePreview {
  id: string;
  /**
   * @minItems 1
   * @maxItems 64
   */
  indices: [number, ...number[]];
  run?: string | null;
  size?: number;
  split?: 'train' | 'val' | 'test';
  type: 'sample_preview';
}
/**
 * Train a copy of the paused model on a slice of the training set (docs/forks.md).
 *
 * The slice is exactly one of: a train ``selection`` by name, explicit dataset ``indices``,
 * or one inline criterion as in ``select`` (read from ``source``). The budget is exactly one
 * of ``steps`` or ``epochs``. Progress comes as ``fork_progress`` events on the fork's run.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Fork".
 */
export interface Fork {
  adapter_rank?: number | null;
  batch_size?: number | null;
  cluster?: number;
  clusters?: number | null;
  confidence_max?: number | null;
  confidence_min?: number | null;
  epochs?: number | null;
  fraction?: number | null;
  id: string;
  indices?: [number, ...number[]] | null;
  loss_max?: number | null;
  loss_min?: number | null;
  lr?: number | null;
  name?: string | null;
  optimizer?: 'fresh' | 'clone';
  quantile?: number | null;
  region?: ('easy' | 'ambiguous' | 'hard' | 'mislabeled') | null;
  replay?: number;
  run?: string | null;
  selection?: string | null;
  size?: number | null;
  source?: ('training' | 'scan') | null;
  steps?: number | null;
  top?: number | null;
  type: 'fork';
  variability_max?: number | null;
  variability_min?: number | null;
  with_correctness?: boolean;
}
/**
 * The run's forks (name, run, slice, budget, status, losses).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Forks".
 */
export interface Forks {
  id: string;
  run?: string | null;
  type: 'forks';
}
/**
 * Evaluate the current model and ``forks`` (default: every fork with weights) on each
 * fork's slice, the rest of the training set and the validation set, in one table.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Compare".
 */
export interface Compare {
  baselines?: boolean;
  /**
   * @maxItems 32
   */
  forks?: string[];
  id: string;
  rest_max?: number;
  run?: string | null;
  type: 'compare';
}
/**
 * Merge ``forks`` into the paused model by ``method``; the merged weights are loaded into
 * the run's model and training resumes from them (docs/forks.md). ``discard_merge`` undoes it
 * while still paused.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Merge".
 */
export interface Merge {
  force?: boolean;
  /**
   * @minItems 1
   * @maxItems 32
   */
  forks: [string, ...string[]];
  id: string;
  lr?: number | null;
  method: 'soup' | 'greedy' | 'fisher' | 'distill' | 'adapter';
  name?: string | null;
  optimizer?: 'keep' | 'reset';
  rest_max?: number;
  run?: string | null;
  steps?: number;
  strength?: number | null;
  temperature?: number | null;
  tolerance?: number;
  type: 'merge';
  weights?: number[] | null;
}
/**
 * Undo the latest merge while the run is still paused: weights and optimizer state back.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "DiscardMerge".
 */
export interface DiscardMerge {
  id: string;
  run?: string | null;
  type: 'discard_merge';
}
/**
 * The lineage of the session's models: nodes, edges and the active node.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ShowLineage".
 */
export interface ShowLineage {
  id: string;
  run?: string | null;
  type: 'lineage';
}
/**
 * The comparison table: one row per model, its scores aligned with ``targets``.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CompareReply".
 */
export interface CompareReply {
  cancelled: false;
  duration: number;
  notes: string[];
  rows: CompareRow[];
  step: number;
  targets: CompareTarget[];
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CompareRow".
 */
export interface CompareRow {
  accuracy: (number | null)[];
  fork: string | null;
  kind: string;
  loss: (number | null)[];
  model: string;
  run: string | null;
  steps: number | null;
}
/**
 * A set of samples the models are scored on: a fork's slice, the rest, validation.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "CompareTarget".
 */
export interface CompareTarget {
  kind: string;
  name: string;
  samples: number;
  split: 'train' | 'val' | 'test';
}
/**
 * Columns aligned by sample (a subsample of ``total``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "DataMapReply".
 */
export interface DataMapReply {
  confidence: (number | null)[];
  correct: (number | null)[];
  index: number[];
  loss: (number | null)[];
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
  total: number;
  variability: (number | null)[];
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "DiscardReply".
 */
export interface DiscardReply {
  active: string;
  epoch: number;
  name: string;
  run: string;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
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
    | 'file_error'
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
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ExplorerReply".
 */
export interface ExplorerReply {
  index: number[];
  loss: (number | null)[];
  method: 'umap' | 'pca';
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
  total: number;
  x: (number | null)[];
  y: (number | null)[];
}
/**
 * The written session file: its absolute ``path`` and ``size`` in bytes.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ExportReply".
 */
export interface ExportReply {
  epoch?: number | null;
  path?: string | null;
  size?: number | null;
  step?: number | null;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ExportSelectionReply".
 */
export interface ExportSelectionReply {
  bytes: number;
  format: 'csv' | 'parquet' | 'json';
  name: string;
  path: string;
  rows: number;
}
/**
 * The fork's record when it ended (``status``) and where the parent run is.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ForkReply".
 */
export interface ForkReply {
  budget: {
    [k: string]: number | undefined;
  };
  created: number;
  duration: number;
  epoch: number;
  has_weights: boolean;
  hparams: {
    [k: string]: unknown | undefined;
  };
  message: string | null;
  name: string;
  parent: string;
  parent_slice_loss: number | null;
  parent_step: number;
  run: string;
  selection: {
    [k: string]: unknown | undefined;
  };
  slice_loss: number | null;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  status: 'running' | 'done' | 'cancelled' | 'failed';
  step: number;
  steps: number;
  warnings: string[];
}
/**
 * One fork of the session (``forks``), without its indices.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ForkSummary".
 */
export interface ForkSummary {
  budget: {
    [k: string]: number | undefined;
  };
  created: number;
  duration: number;
  has_weights: boolean;
  hparams: {
    [k: string]: unknown | undefined;
  };
  message: string | null;
  name: string;
  parent: string;
  parent_slice_loss: number | null;
  parent_step: number;
  run: string;
  selection: {
    [k: string]: unknown | undefined;
  };
  slice_loss: number | null;
  status: 'running' | 'done' | 'cancelled' | 'failed';
  steps: number;
  warnings: string[];
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ForksReply".
 */
export interface ForksReply {
  forks: ForkSummary[];
}
/**
 * The findings of one health check: the ``health`` command's reply and, with its tag,
 * the ``health_result`` event.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HealthOutcome".
 */
export interface HealthOutcome {
  check:
    'determinism' | 'gradients' | 'instability' | 'activations' | 'throughput' | 'distribution';
  duration: number;
  findings: Finding[];
  step: number;
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
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HistogramReply".
 */
export interface HistogramReply {
  above: number;
  below: number;
  counts: number[];
  edges: number[];
  max: number | null;
  mean: number | null;
  min: number | null;
  missing: number;
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
  total: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HistoryReply".
 */
export interface HistoryReply {
  metric: string;
  run: string;
  series: Series;
  split: 'train' | 'val' | 'test';
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
 * One hyperparameter of one param group changed at ``step``: an item of the ``set``
 * reply and, with its tag, the ``hparam_change`` event.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "HparamEdit".
 */
export interface HparamEdit {
  group: number;
  name: 'lr' | 'weight_decay' | 'momentum' | 'betas' | 'eps';
  new: number | number[];
  old: number | number[] | null;
  optimizer: number;
  step: number;
}
/**
 * The session's models as a DAG: the ``lineage`` command's reply and, with its tag, the
 * ``lineage`` event.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LineageView".
 */
export interface LineageView {
  active: string;
  edges: LineageEdge[];
  nodes: LineageNode[];
}
/**
 * What ``import`` or ``restore`` loaded into the paused run.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "LoadReply".
 */
export interface LoadReply {
  epoch: number;
  loaded: string;
  loaded_epoch: number;
  loaded_step: number;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
}
/**
 * The merge's report: the scores before and after on each target, and whether the
 * merged weights replaced the run's.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "MergeReply".
 */
export interface MergeReply {
  after: Scores;
  applied: boolean;
  before: Scores;
  choice: {
    [k: string]: unknown | undefined;
  };
  distill: {
    [k: string]: number | undefined;
  } | null;
  duration: number;
  epoch: number;
  forks: string[];
  gate: {
    [k: string]: unknown | undefined;
  };
  grid: {
    [k: string]: unknown | undefined;
  }[];
  kept: string[] | null;
  method: 'soup' | 'greedy' | 'fisher' | 'distill' | 'adapter';
  name: string;
  optimizer: 'keep' | 'reset';
  reason?: string | null;
  run: string | null;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
  targets: CompareTarget[];
}
/**
 * A model's mean loss and accuracy on each target, aligned with the targets.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Scores".
 */
export interface Scores {
  accuracy: (number | null)[];
  loss: (number | null)[];
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "PingReply".
 */
export interface PingReply {
  seq: number;
  time: number;
}
/**
 * Where the run is when the command took effect (``pause``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Position".
 */
export interface Position {
  epoch: number;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "QuantilesReply".
 */
export interface QuantilesReply {
  count: number;
  mean: number | null;
  q: number[];
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
  values: (number | null)[];
}
/**
 * The data of the reply to each command type.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "Replies".
 */
export interface Replies {
  cancel: CancelReply;
  checkpoints: CheckpointsReply;
  compare: CompareReply | Cancelled;
  data_map: DataMapReply;
  discard_merge: DiscardReply;
  explorer: ExplorerReply;
  export: ExportReply;
  export_selection: ExportSelectionReply;
  fork: ForkReply;
  forks: ForksReply;
  health: HealthOutcome;
  histogram: HistogramReply;
  history: HistoryReply;
  import: LoadReply;
  lineage: LineageView;
  merge: MergeReply | Cancelled;
  pause: Position;
  ping: PingReply;
  quantiles: QuantilesReply;
  restore: LoadReply;
  resume: ResumeReply;
  sample_preview: SamplePreviewReply;
  scan: ScanReply | Cancelled;
  select: SelectReply;
  selection_rows: RowsReply;
  selections: SelectionsReply;
  set: SetReply;
  snapshot: CheckpointEntry;
  status: StatusReply;
  stop: StopReply;
  subscribe: SubscribeReply;
  test: TestOutcome;
  unsubscribe: SeqReply;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ResumeReply".
 */
export interface ResumeReply {
  after_end?: {
    [k: string]: number | undefined;
  } | null;
  epoch: number;
  max_epochs: number | null;
  max_steps: number | null;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SamplePreviewReply".
 */
export interface SamplePreviewReply {
  previews: {
    [k: string]: unknown | undefined;
  }[];
  split: 'train' | 'val' | 'test';
}
/**
 * The scanned split: its size and loss range, and how fast it went.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "ScanReply".
 */
export interface ScanReply {
  cancelled: false;
  duration: number;
  loss_max: number | null;
  loss_mean: number | null;
  loss_min: number | null;
  samples_per_s: number | null;
  size: number;
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SelectReply".
 */
export interface SelectReply {
  clusters?: ClusterInfo[] | null;
  created: number;
  criterion: {
    [k: string]: unknown | undefined;
  };
  loss_max: number | null;
  loss_mean: number | null;
  loss_min: number | null;
  name: string;
  preview: SampleRow[];
  size: number;
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
  threshold?: number | null;
}
/**
 * One sample's current statistics (``None``: not known).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SampleRow".
 */
export interface SampleRow {
  confidence: number | null;
  correct: number | null;
  count: number;
  index: number;
  label: number | null;
  loss: number | null;
  margin: number | null;
  variability: number | null;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "RowsReply".
 */
export interface RowsReply {
  name: string;
  offset: number;
  rows: SampleRow[];
  total: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SelectionsReply".
 */
export interface SelectionsReply {
  selections: SelectionSummary[];
}
/**
 * A named selection, without its ids.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SelectionSummary".
 */
export interface SelectionSummary {
  created: number;
  criterion: {
    [k: string]: unknown | undefined;
  };
  name: string;
  size: number;
  source: 'training' | 'scan';
  split: 'train' | 'val' | 'test';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SetReply".
 */
export interface SetReply {
  changes: HparamEdit[];
  step: number;
}
/**
 * Every run of the session, and the state of the one asked about (``run``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "StatusReply".
 */
export interface StatusReply {
  alerts: (
    'nonfinite_loss' | 'nonfinite_grad' | 'loss_spike' | 'stalled' | 'loader_crashed' | 'crashed'
  )[];
  epoch: number;
  latest: {
    [k: string]: number | null | undefined;
  };
  run: string;
  runs: RunInfo[];
  seq: number;
  state: 'running' | 'paused' | 'testing' | 'finished';
  step: number;
}
/**
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "StopReply".
 */
export interface StopReply {
  epoch: number;
  state: ('running' | 'paused' | 'testing' | 'finished') | 'stopping';
  step: number;
  stopping: boolean;
}
/**
 * ``snapshot``: a ``snapshot`` frame follows; ``replay``: the events after ``since`` do.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SubscribeReply".
 */
export interface SubscribeReply {
  mode: 'snapshot' | 'replay';
  seq: number;
}
/**
 * One evaluation of the test loader: the ``test`` command's reply and, with its tag, the
 * ``test_result`` event.
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "TestOutcome".
 */
export interface TestOutcome {
  duration: number;
  label: string;
  loss: number | null;
  metrics: {
    [k: string]: number | null | undefined;
  };
  step: number;
}
/**
 * The ``seq`` of the latest stream event (``unsubscribe``).
 *
 * This interface was referenced by `OnTheFlyProtocol`'s JSON-Schema
 * via the `definition` "SeqReply".
 */
export interface SeqReply {
  seq: number;
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
  alert_history: Alert[];
  alerts: (
    'nonfinite_loss' | 'nonfinite_grad' | 'loss_spike' | 'stalled' | 'loader_crashed' | 'crashed'
  )[];
  clock: Clock;
  config: {
    [k: string]: number | string | boolean | null | undefined;
  };
  epoch: number;
  epoch_starts: number[];
  health: HealthResult[];
  hparam_changes: HparamChange[];
  latest: {
    [k: string]: number | null | undefined;
  };
  lineage: LineageChanged | null;
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
