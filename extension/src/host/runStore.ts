/**
 * The extension host's copy of every session: one connection per discovered session, the
 * shared reducer folding its messages into the dashboard state, and listeners (the panel,
 * the status bar) told about every change. Ended sessions stay, so their runs remain
 * viewable; only the oldest ended ones are dropped past a bound.
 */
import { WebSocket } from 'ws';
import { Connection, type ConnectionOptions, type SocketLike } from '../common/connection';
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import {
  applyServerMessage,
  DEFAULT_LIMITS,
  emptyState,
  newSource,
  type DashboardState,
  type Limits,
  type SourceView,
} from '../common/state';
import type { SessionFile } from './discovery';
import { Disposable, toDisposable, type DisposableLike } from './disposable';

export type StoreListener = (message: HostToView) => void;

export interface RunStoreOptions {
  limits: Limits;
  connection: Partial<ConnectionOptions>;
  /** Ended sessions kept for viewing; older ones are forgotten. */
  maxEnded: number;
  openSocket: (session: SessionFile) => SocketLike;
  log: (text: string) => void;
}

/** A socket to a session with its token in the `Authorization` header (never in a URL). */
export function openSessionSocket(session: SessionFile): SocketLike {
  const socket = new WebSocket(`ws://127.0.0.1:${session.port}/`, {
    // The User-Agent tells the session a VS Code dashboard connected (it prints that once).
    headers: { Authorization: `Bearer ${session.token}`, 'User-Agent': 'onthefly-vscode' },
  });
  return socket as unknown as SocketLike;
}

export class RunStore extends Disposable {
  readonly state: DashboardState = emptyState();
  private readonly options: RunStoreOptions;
  private readonly connections = new Map<string, Connection>();
  private readonly listeners = new Set<StoreListener>();

  constructor(options: Partial<RunStoreOptions> = {}) {
    super();
    this.options = {
      limits: DEFAULT_LIMITS,
      connection: {},
      maxEnded: 20,
      openSocket: openSessionSocket,
      log: () => undefined,
      ...options,
    };
    this.register(toDisposable(() => this.closeAll()));
  }

  /** Listen to every change; the listener gets exactly what a page must apply. */
  subscribe(listener: StoreListener): DisposableLike {
    this.listeners.add(listener);
    return toDisposable(() => this.listeners.delete(listener));
  }

  /** Connect to a discovered session (again, if it had been seen before under this key). */
  addSession(session: SessionFile): void {
    if (this.isDisposed || this.connections.has(session.key)) return;
    const key = session.key;
    const label = `${session.project}/${session.run}`;
    const source = (this.state.sources[key] ??= newSource(key, label));
    source.ended = false;
    const connection = new Connection(
      () => this.options.openSocket(session),
      {
        status: (status, detail) => {
          if (source.status !== status) this.options.log(`${label} (${key}): ${status} — ${detail}`);
          source.status = status;
          this.emitSource(source);
        },
        message: (message) => {
          if (applyServerMessage(source, message, this.options.limits)) {
            this.emit({ type: 'server', source: key, message });
          }
        },
        warn: (text) => this.options.log(`${label} (${key}): ${text}`),
      },
      this.options.connection,
    );
    this.connections.set(key, connection);
    this.emitSource(source);
    connection.start();
  }

  /** The session's process ended: stop connecting, keep its runs viewable. */
  endSession(key: string): void {
    const connection = this.connections.get(key);
    this.connections.delete(key);
    connection?.close();
    const source = this.state.sources[key];
    if (!source) return;
    source.ended = true;
    source.status = 'closed';
    this.emitSource(source);
    this.forgetOldEnded();
  }

  /** Send a command to a session's run; the outcome is always resolved, never rejected. */
  request(key: string, command: CommandBody): Promise<Outcome> {
    const connection = this.connections.get(key);
    if (!connection) {
      return Promise.resolve({
        ok: false,
        code: 'session_closed',
        message: `session ${key} has ended; its runs can be viewed but not controlled`,
      });
    }
    return connection.request(command);
  }

  private emitSource(source: SourceView): void {
    this.emit({
      type: 'source',
      source: source.key,
      label: source.label,
      status: source.status,
      ended: source.ended,
    });
  }

  private emit(message: HostToView): void {
    for (const listener of this.listeners) listener(message);
  }

  private forgetOldEnded(): void {
    const ended = Object.values(this.state.sources).filter((s) => s.ended);
    // Keys are `<pid>-<port>` and sessions are added in discovery order: insertion order is age.
    for (const source of ended.slice(0, Math.max(0, ended.length - this.options.maxEnded))) {
      delete this.state.sources[source.key];
    }
  }

  private closeAll(): void {
    for (const connection of this.connections.values()) connection.close();
    this.connections.clear();
    this.listeners.clear();
  }
}
