/**
 * The page in a browser: served by the hub (`onthefly dashboard`) or by one run's own session
 * server, at `http://127.0.0.1:PORT/?token=…`. Every `pollMs` the page asks its server for
 * the sessions to show (`GET /sessions?token=…`) and keeps one websocket per session.
 *
 * - **Hub**: the list names each session's path on the hub (`/ws/<key>`); the page connects
 *   there with the hub's token only. Sessions the hub says ended stay connected (the hub keeps
 *   their history, read-only) and show as ended; a restarted run is a new session beside its
 *   old one. When the hub stops answering, the page says so and reconnects when it is back
 *   (its address does not change).
 * - **A run's own page**: the list holds the live sessions of the machine with their tokens
 *   (the page connects to each directly). When the process that served the page stops
 *   answering, the page says so — its charts stay — points to the hub, and stops retrying the
 *   sessions it can no longer reach, instead of knocking on a closed door forever.
 */
import { Connection, type ConnectionOptions, type SocketLike } from '../common/connection';
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import type { ConnectionStatus } from '../common/state';
import type { Transport } from './transport';

const UI_STATE_KEY = 'onthefly.ui';

/** One entry of a run's `GET /sessions`: a live session on this machine, with its token. */
export interface LiveSession {
  pid: number;
  port: number;
  project: string;
  run: string;
  session: string;
  token: string;
  started_at: number;
}

/** One entry of the hub's `GET /sessions`: a session the hub serves at `path`. */
export interface HubSession {
  key: string;
  kind: 'session' | 'file';
  project: string;
  run: string;
  started_at: number;
  live: boolean;
  path: string;
  file?: string;
}

export interface SocketTransportOptions {
  /** Milliseconds between two looks at the list of sessions. */
  pollMs: number;
  /** Looks that fail in a row before the page says its server is gone. */
  failuresBeforeNotice: number;
  /** GET a path of the page's own server as parsed JSON; rejects on an HTTP error. */
  fetchJson: (path: string) => Promise<unknown>;
  openSocket: (url: string) => SocketLike;
  connection: Partial<ConnectionOptions>;
}

export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const DEFAULTS: SocketTransportOptions = {
  pollMs: 2000,
  failuresBeforeNotice: 2,
  fetchJson: async (path) => {
    const response = await fetch(path, { cache: 'no-store', credentials: 'omit' });
    // The path carries the token: name only the endpoint.
    if (!response.ok) throw new HttpError(response.status, `${path.split('?')[0]} answered HTTP ${response.status}`);
    return response.json();
  },
  openSocket: (url) => new WebSocket(url) as unknown as SocketLike,
  connection: {},
};

/** Where to go on when the page's run has gone: the hub, with its default address. */
export const HUB_HINT =
  'To follow every run on this machine — live, ended and restarted — in one tab, run `onthefly dashboard` ' +
  'and open the address it prints (http://127.0.0.1:47620/?token=…).';

/** What the page says when its own server stopped answering. */
export function lostNotice(hub: boolean, status: number | null): string {
  if (hub) return 'The hub stopped answering: start `onthefly dashboard` again (same address) and this tab reconnects. What it showed stays here.';
  const why =
    status === 401
      ? 'The run that served this page restarted with a new token'
      : 'The run that served this page has ended (or restarted at a new address)';
  return `${why}: its charts stay in this tab until you close it. ${HUB_HINT}`;
}

/** The same key the extension host gives a session (`<pid>-<port>`): unique over time. */
export function sessionKey(session: Pick<LiveSession, 'pid' | 'port'>): string {
  return `${session.pid}-${session.port}`;
}

/** The sessions of a run's `GET /sessions` answer; malformed entries are skipped. */
export function parseLiveSessions(body: unknown): LiveSession[] {
  const list = (body as { sessions?: unknown } | null)?.sessions;
  if (!Array.isArray(list)) throw new Error('expected {"sessions": [...]} from /sessions');
  return list.filter(
    (s): s is LiveSession =>
      typeof s === 'object' &&
      s !== null &&
      Number.isInteger(s.pid) &&
      Number.isInteger(s.port) &&
      typeof s.token === 'string' &&
      typeof s.project === 'string' &&
      typeof s.run === 'string',
  );
}

/** The sessions of the hub's `GET /sessions` answer (`{hub: true, …}`); malformed entries are skipped. */
export function parseHubSessions(body: unknown): HubSession[] {
  const list = (body as { sessions?: unknown } | null)?.sessions;
  if (!Array.isArray(list)) throw new Error('expected {"sessions": [...]} from /sessions');
  return list.filter(
    (s): s is HubSession =>
      typeof s === 'object' &&
      s !== null &&
      typeof s.key === 'string' &&
      typeof s.path === 'string' &&
      s.path.startsWith('/ws/') &&
      typeof s.project === 'string' &&
      typeof s.run === 'string' &&
      typeof s.live === 'boolean',
  );
}

/** What the page connects to for one listed session. */
interface Target {
  key: string;
  label: string;
  url: string;
  ended: boolean;
}

interface Held {
  connection: Connection;
  label: string;
  status: ConnectionStatus;
  ended: boolean;
}

export class SocketTransport implements Transport {
  private readonly options: SocketTransportOptions;
  private readonly connections = new Map<string, Held>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private failures = 0;
  private hub = false;
  private notice = '';

  /**
   * Args: `location` is the page's address; its `token` query parameter authenticates, its
   * `run` parameter names the run to show first.
   * Example: `new SocketTransport(window.location).start(receive)`.
   */
  constructor(
    private readonly location: Pick<Location, 'hostname' | 'search'> & Partial<Pick<Location, 'port'>>,
    private readonly storage: Pick<Storage, 'getItem' | 'setItem'> = sessionStorage,
    options: Partial<SocketTransportOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  /** Throws: Error when the page's address has no token (it was opened without one). */
  start(receive: (message: HostToView) => void): void {
    const token = new URLSearchParams(this.location.search).get('token');
    if (!token) {
      throw new Error(
        'this page needs its token: open the address `onthefly dashboard` or the training script printed ' +
          '(http://127.0.0.1:PORT/?token=…)',
      );
    }
    const poll = async (): Promise<void> => {
      try {
        const body = await this.options.fetchJson(`/sessions?token=${encodeURIComponent(token)}`);
        if (this.closed) return;
        this.hub = (body as { hub?: unknown } | null)?.hub === true;
        this.failures = 0;
        this.say('', receive);
        this.sync(this.hub ? this.hubTargets(body, token) : this.runTargets(body), receive);
      } catch (error) {
        this.lost(error, receive);
      }
      if (!this.closed) this.timer = setTimeout(() => void poll(), this.delay());
    };
    void poll();
  }

  /** The run `?run=` names (`name` or `project/name`), if any. */
  wantedRun(): string | null {
    return new URLSearchParams(this.location.search).get('run');
  }

  /** Stop looking for sessions and close every connection. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const { connection } of this.connections.values()) connection.close();
    this.connections.clear();
  }

  request(source: string, command: CommandBody): Promise<Outcome> {
    const held = this.connections.get(source);
    if (!held) {
      return Promise.resolve({
        ok: false,
        code: 'session_closed',
        message: `session ${source} has ended; its runs can be viewed but not controlled`,
      });
    }
    return held.connection.request(command);
  }

  savePng(name: string, dataUrl: string): void {
    const link = document.createElement('a');
    link.href = dataUrl;
    link.download = name;
    link.click();
  }

  loadUiState(): unknown {
    try {
      return JSON.parse(this.storage.getItem(UI_STATE_KEY) ?? 'null');
    } catch {
      return null;
    }
  }

  saveUiState(state: unknown): void {
    this.storage.setItem(UI_STATE_KEY, JSON.stringify(state));
  }

  private delay(): number {
    // Slower while the server is gone: it may come back (the hub), but it need not be hammered.
    return this.failures > this.options.failuresBeforeNotice ? this.options.pollMs * 5 : this.options.pollMs;
  }

  private runTargets(body: unknown): Target[] {
    return parseLiveSessions(body).map((s) => ({
      key: sessionKey(s),
      label: `${s.project}/${s.run}`,
      // Same host name as the page, so the page's origin and the socket's host agree.
      url: `ws://${this.location.hostname}:${s.port}/?token=${encodeURIComponent(s.token)}`,
      ended: false,
    }));
  }

  private hubTargets(body: unknown, token: string): Target[] {
    const port = this.location.port ? `:${this.location.port}` : '';
    return parseHubSessions(body).map((s) => ({
      key: s.key,
      // An exported file is named by its path in the hub's folder.
      label: s.kind === 'file' ? (s.file ?? s.key) : `${s.project}/${s.run}`,
      url: `ws://${this.location.hostname}${port}${s.path}?token=${encodeURIComponent(token)}`,
      ended: !s.live,
    }));
  }

  /** Connect to the sessions new in `targets`; end the ones no longer in it. */
  private sync(targets: Target[], receive: (message: HostToView) => void): void {
    const listed = new Set<string>();
    for (const target of targets) {
      listed.add(target.key);
      const held = this.connections.get(target.key);
      if (!held) this.connect(target, receive);
      else if (target.ended && !held.ended) {
        held.ended = true;
        receive({ type: 'source', source: target.key, label: held.label, status: held.status, ended: true });
      }
    }
    for (const [key, held] of this.connections) {
      if (!listed.has(key)) this.drop(key, held, receive);
    }
  }

  private lost(error: unknown, receive: (message: HostToView) => void): void {
    this.failures++;
    if (this.failures < this.options.failuresBeforeNotice) return;
    const status = error instanceof HttpError ? error.status : null;
    this.say(lostNotice(this.hub, status), receive);
    if (this.hub) return; // the hub's sessions reconnect by themselves when it is back
    // Nobody can tell this page any more which sessions still live: keep those it reaches,
    // stop retrying the others.
    for (const [key, held] of this.connections) if (held.status !== 'open') this.drop(key, held, receive);
  }

  private drop(key: string, held: Held, receive: (message: HostToView) => void): void {
    this.connections.delete(key);
    held.connection.close();
    receive({ type: 'source', source: key, label: held.label, status: 'closed', ended: true });
  }

  private say(text: string, receive: (message: HostToView) => void): void {
    if (text === this.notice) return;
    this.notice = text;
    receive({ type: 'notice', text });
  }

  private connect(target: Target, receive: (message: HostToView) => void): void {
    const { key, label, url } = target;
    const held: Held = { connection: null as unknown as Connection, label, status: 'connecting', ended: target.ended };
    held.connection = new Connection(
      () => this.options.openSocket(url),
      {
        status: (status) => {
          held.status = status;
          // A connection closed after its session left the list must not revive it.
          if (this.connections.get(key) === held) receive({ type: 'source', source: key, label, status, ended: held.ended });
        },
        message: (message) => receive({ type: 'server', source: key, message }),
        warn: (text) => console.warn(`OnTheFly (${label}): ${text}`),
      },
      this.options.connection,
    );
    this.connections.set(key, held);
    held.connection.start();
  }
}
