/**
 * The dashboard's model of every session it has seen, and the reducer that folds wire
 * messages into it. The extension host and the page run the same reducer: the host keeps
 * the state while no page is open and hands it over on `ready`; the page then applies the
 * same relayed messages, dropping by `seq` whatever the handed-over state already holds.
 *
 * The reducer mutates in place: series can hold many thousands of points and copying them
 * per event would cost more than drawing them.
 */
import type {
  Alert,
  Clock,
  ForkProgress,
  HealthResult,
  HparamChange,
  HparamError,
  LineageChanged,
  LogRecord,
  RunInfo,
  RuntimeEvent,
  ScanProgress,
  ServerMessage,
  Snapshot,
  TestResult,
} from '../protocol.gen';
import { appendPoint, emptySeries, fromWire, seriesKey, type SeriesData } from './series';

export type ConnectionStatus = 'connecting' | 'open' | 'closed';
export type StreamEvent = Extract<ServerMessage, { seq: number; run: string }>;
/** What the status pill shows; `disconnected` is never confused with `paused`. */
export type Pill = RunInfo['state'] | 'disconnected';

export interface RunView {
  info: RunInfo;
  series: Record<string, SeriesData>;
  epochStarts: number[];
  runtime: RuntimeEvent | null;
  tests: TestResult[];
  /** The latest result of each health check, by check name. */
  health: Partial<Record<HealthResult['check'], HealthResult>>;
  /** Hyperparameter changes in step order (chart markers). */
  hparams: HparamChange[];
  /** The latest edit the optimizer failed under (rolled back, run paused), if any. */
  hparamError: HparamError | null;
  /** The latest progress of a full-split scan, by split. */
  scans: Partial<Record<ScanProgress['split'], ScanProgress>>;
  /** A fork run's latest training progress. */
  fork: ForkProgress | null;
  /** The main run's latest lineage of forks and merges. */
  lineage: LineageChanged | null;
  /** Every alert of the run (raised and cleared), oldest first. */
  alerts: Alert[];
  /** Wall-clock anchors (one per second of training at most): the time of a step. */
  clock: Clock;
}

export interface LogEntry {
  run: string | null;
  record: LogRecord;
}

export interface SourceView {
  /** Stable key of the session (`<pid>-<port>` or the page's host). */
  key: string;
  label: string;
  status: ConnectionStatus;
  /** The session is gone for good (its process ended); its runs stay viewable. */
  ended: boolean;
  session: string | null;
  /** Highest stream `seq` folded in (or skipped by a `coalesced` notice). */
  lastSeq: number;
  /** Telemetry events the server skipped for this client (see `coalesced`). */
  dropped: number;
  runs: Record<string, RunView>;
  logs: LogEntry[];
}

export interface DashboardState {
  sources: Record<string, SourceView>;
}

export interface Limits {
  /** Points a streamed series is brought back to when it doubles. */
  maxPoints: number;
  maxLogs: number;
  maxTests: number;
  maxAlerts: number;
}

export const DEFAULT_LIMITS: Limits = { maxPoints: 4000, maxLogs: 2000, maxTests: 500, maxAlerts: 500 };

/** Seconds of training between two wall-clock anchors, as the session server keeps them. */
const CLOCK_INTERVAL_S = 1;

export function emptyState(): DashboardState {
  return { sources: {} };
}

export function newSource(key: string, label: string): SourceView {
  return {
    key,
    label,
    status: 'connecting',
    ended: false,
    session: null,
    lastSeq: 0,
    dropped: 0,
    runs: {},
    logs: [],
  };
}

export function pill(source: SourceView, run: RunView): Pill {
  if (run.info.state === 'finished') return 'finished';
  return source.status === 'open' ? run.info.state : 'disconnected';
}

/**
 * Fold one server message into `source`; returns whether anything changed.
 *
 * Events at or below `source.lastSeq` are duplicates (a replay after a reconnect, or
 * already in a handed-over state) and are ignored. Replies and errors answer commands and
 * never change the state.
 */
export function applyServerMessage(
  source: SourceView,
  msg: ServerMessage,
  limits: Limits = DEFAULT_LIMITS,
): boolean {
  switch (msg.type) {
    case 'hello':
      if (source.session !== null && source.session !== msg.session) source.lastSeq = 0;
      source.session = msg.session;
      return true;
    case 'snapshot':
      mergeSnapshot(source, msg, limits);
      return true;
    case 'batch': {
      let changed = false;
      for (const event of msg.events) changed = applyEvent(source, event, limits) || changed;
      return changed;
    }
    case 'coalesced':
      if (msg.from_seq <= source.lastSeq + 1) source.lastSeq = Math.max(source.lastSeq, msg.to_seq);
      source.dropped += msg.dropped;
      return true;
    case 'reply':
    case 'error':
      return false;
    case 'run_started':
    case 'status':
    case 'metrics':
    case 'steps':
    case 'epoch':
    case 'runtime':
    case 'log':
    case 'test_result':
    case 'health_result':
    case 'hparam_change':
    case 'hparam_error':
    case 'scan_progress':
    case 'fork_progress':
    case 'lineage':
    case 'alert':
    case 'config':
      return applyEvent(source, msg, limits);
    default:
      return unreachable(msg);
  }
}

function applyEvent(source: SourceView, event: StreamEvent, limits: Limits): boolean {
  if (event.seq <= source.lastSeq) return false;
  source.lastSeq = event.seq;
  if (event.type === 'run_started') {
    const known = source.runs[event.run];
    if (known) known.info = { ...event.info };
    else source.runs[event.run] = newRun({ ...event.info });
    return true;
  }
  const run = source.runs[event.run] ?? addPlaceholderRun(source, event);
  const info = run.info;
  switch (event.type) {
    case 'status':
      info.state = event.state;
      info.step = event.step;
      info.epoch = event.epoch;
      break;
    case 'metrics':
      for (const [name, value] of Object.entries(event.values)) {
        const key = seriesKey(event.split, name);
        const series = (run.series[key] ??= emptySeries());
        appendPoint(series, event.step, value ?? null, limits.maxPoints);
        info.latest[key] = value ?? null;
      }
      if (event.split === 'train') tick(run.clock, event.step, event.time);
      info.step = Math.max(info.step, event.step);
      info.epoch = Math.max(info.epoch, event.epoch);
      break;
    case 'steps': {
      // A batch of steps as columns: each metric's points, in step order.
      for (const [name, points] of Object.entries(event.values)) {
        if (!points) continue;
        const key = seriesKey(event.split, name);
        const series = (run.series[key] ??= emptySeries());
        const { steps, values } = points;
        for (let i = 0; i < steps.length; i++) {
          appendPoint(series, steps[i], values[i] ?? null, limits.maxPoints);
        }
        if (steps.length) info.latest[key] = values[steps.length - 1] ?? null;
      }
      const last = event.steps.length - 1;
      if (event.split === 'train') tick(run.clock, event.steps[last], event.time);
      info.step = Math.max(info.step, event.steps[last]);
      info.epoch = Math.max(info.epoch, event.epochs[last]);
      break;
    }
    case 'epoch':
      if (!run.epochStarts.includes(event.step)) {
        run.epochStarts.push(event.step);
        run.epochStarts.sort((a, b) => a - b);
      }
      info.epoch = Math.max(info.epoch, event.epoch);
      break;
    case 'runtime':
      run.runtime = event;
      info.step = Math.max(info.step, event.step);
      break;
    case 'log':
      pushBounded(source.logs, { run: event.run, record: event.record }, limits.maxLogs);
      break;
    case 'test_result':
      pushBounded(run.tests, event, limits.maxTests);
      break;
    case 'health_result':
      run.health[event.check] = event;
      break;
    case 'hparam_change':
      addHparamChange(run.hparams, event);
      break;
    case 'hparam_error':
      run.hparamError = event;
      break;
    case 'scan_progress':
      run.scans[event.split] = event;
      break;
    case 'fork_progress':
      run.fork = event;
      break;
    case 'lineage':
      run.lineage = event;
      break;
    case 'alert':
      addAlert(run, event, limits.maxAlerts);
      break;
    case 'config':
      info.config = { ...event.values };
      break;
    default:
      return unreachable(event);
  }
  return true;
}

/**
 * A snapshot is the truth up to its `seq`: it replaces the info and the series it carries.
 * Runs it does not mention (finished runs of a previous connection) and what snapshots
 * never carry (runtime, test results, scan and fork progress) are kept; a run's lineage is
 * the newest of the snapshot's and the one already streamed.
 */
function mergeSnapshot(source: SourceView, snapshot: Snapshot, limits: Limits): void {
  if (source.session !== snapshot.session) source.session = snapshot.session;
  source.lastSeq = snapshot.seq;
  for (const wire of snapshot.runs) {
    const { series, epoch_starts, health, hparam_changes, lineage, alert_history, clock, ...info } = wire;
    const run = (source.runs[info.run] ??= newRun(info));
    // A server older than alerts, configs and clocks sends none of them: read them as empty.
    run.info = { ...info, latest: { ...info.latest }, alerts: [...(info.alerts ?? [])], config: { ...(info.config ?? {}) } };
    for (const alert of alert_history ?? []) if (!run.alerts.some((a) => a.seq === alert.seq)) run.alerts.push(alert);
    run.alerts.sort((a, b) => a.seq - b.seq);
    if (clock && clock.steps.length >= run.clock.steps.length) run.clock = { steps: clock.steps.slice(), times: clock.times.slice() };
    if (lineage && (run.lineage === null || run.lineage.seq <= lineage.seq)) run.lineage = lineage;
    for (const result of health) run.health[result.check] = result;
    for (const change of hparam_changes) addHparamChange(run.hparams, change);
    for (const [key, points] of Object.entries(series)) {
      if (!points) continue;
      const next = fromWire(points);
      next.rev = (run.series[key]?.rev ?? 0) + 1;
      run.series[key] = next;
    }
    run.epochStarts = epoch_starts.slice();
  }
  const first = snapshot.logs[0]?.time ?? Infinity;
  const older = source.logs.filter((entry) => entry.record.time < first);
  const merged = older.concat(snapshot.logs.map((record) => ({ run: null, record })));
  source.logs = merged.slice(Math.max(0, merged.length - limits.maxLogs));
}

export function newRun(info: RunInfo): RunView {
  return {
    info: { ...info, alerts: [...(info.alerts ?? [])], config: { ...(info.config ?? {}) } },
    series: {},
    epochStarts: [],
    runtime: null,
    tests: [],
    health: {},
    hparams: [],
    hparamError: null,
    scans: {},
    fork: null,
    lineage: null,
    alerts: [],
    clock: { steps: [], times: [] },
  };
}

/** Keep an alert (once), and the run's raised alerts as the stream says. */
function addAlert(run: RunView, alert: Alert, max: number): void {
  if (run.alerts.some((a) => a.seq === alert.seq)) return;
  pushBounded(run.alerts, alert, max);
  const raised = run.info.alerts.filter((kind) => kind !== alert.kind);
  run.info.alerts = alert.state === 'raised' ? [...raised, alert.kind] : raised;
}

/** A wall-clock anchor at most every second of training, as the server keeps them. */
function tick(clock: Clock, step: number, time: number): void {
  const n = clock.steps.length;
  if (n && (time - clock.times[n - 1] < CLOCK_INTERVAL_S || step <= clock.steps[n - 1])) return;
  clock.steps.push(step);
  clock.times.push(time);
}

/** Keep changes in step order, once each (a snapshot repeats the ones already streamed). */
function addHparamChange(list: HparamChange[], change: HparamChange): void {
  if (list.some((c) => c.seq === change.seq)) return;
  list.push(change);
  list.sort((a, b) => a.step - b.step || a.seq - b.seq);
}

/** Telemetry for a run this client never saw start (it began before a skipped range). */
function addPlaceholderRun(source: SourceView, event: StreamEvent): RunView {
  const run = newRun({
    run: event.run,
    project: source.label,
    name: event.run,
    parent: null,
    state: 'running',
    step: 0,
    epoch: 0,
    started_at: event.time,
    latest: {},
    alerts: [],
    config: {},
  });
  source.runs[event.run] = run;
  return run;
}

function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

/** The `never` default of exhaustive switches: a new message type is a compile error. */
export function unreachable(value: never): never {
  throw new Error(`unhandled message ${JSON.stringify(value)}`);
}
