/**
 * The page in a browser, served by a session server at `http://127.0.0.1:PORT/?token=…`.
 *
 * One tab shows every run on the machine: the page asks its own server for the live
 * sessions (`GET /sessions?token=…`, every `pollMs`) and opens one websocket per session,
 * each with that session's token. A session that leaves the list is closed and marked
 * ended; its runs stay viewable. Each session server accepts the page's origin only while
 * the page's own session is live in the same discovery folder, so the list comes from the
 * page's own server: once that process ends, the page keeps what it has but learns of no
 * new session (open the address of a live run for that).
 */
import { Connection, type ConnectionOptions, type SocketLike } from '../common/connection';
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import type { Transport } from './transport';

const UI_STATE_KEY = 'onthefly.ui';

/** One entry of `GET /sessions`: a live session on this machine. */
export interface LiveSession {
  pid: number;
  port: number;
  project: string;
  run: string;
  session: string;
  token: string;
  started_at: number;
}

export interface SocketTransportOptions {
  /** Milliseconds between two looks at the list of live sessions. */
  pollMs: number;
  /** GET a path of the page's own server as parsed JSON; rejects on an HTTP error. */
  fetchJson: (path: string) => Promise<unknown>;
  openSocket: (url: string) => SocketLike;
  connection: Partial<ConnectionOptions>;
}

const DEFAULTS: SocketTransportOptions = {
  pollMs: 2000,
  fetchJson: async (path) => {
    const response = await fetch(path, { cache: 'no-store', credentials: 'omit' });
    // The path carries the token: name only the endpoint.
    if (!response.ok) throw new Error(`${path.split('?')[0]} answered HTTP ${response.status}`);
    return response.json();
  },
  openSocket: (url) => new WebSocket(url) as unknown as SocketLike,
  connection: {},
};

/** The same key the extension host gives a session (`<pid>-<port>`): unique over time. */
export function sessionKey(session: Pick<LiveSession, 'pid' | 'port'>): string {
  return `${session.pid}-${session.port}`;
}

/** The sessions of a `GET /sessions` answer; malformed entries are skipped. */
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

export class SocketTransport implements Transport {
  private readonly options: SocketTransportOptions;
  /** Open sessions by key, with their label (`project/run`). */
  private readonly connections = new Map<string, { connection: Connection; label: string }>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private lastWarning = '';

  /**
   * Args: `location` is the page's address; its `token` query parameter authenticates.
   * Example: `new SocketTransport(window.location).start(receive)`.
   */
  constructor(
    private readonly location: Pick<Location, 'hostname' | 'search'>,
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
        'this page needs its session token: open the address the training script printed ' +
          '(http://127.0.0.1:PORT/?token=…)',
      );
    }
    const poll = async (): Promise<void> => {
      try {
        const listed = parseLiveSessions(
          await this.options.fetchJson(`/sessions?token=${encodeURIComponent(token)}`),
        );
        if (!this.closed) this.sync(listed, receive);
      } catch (error) {
        // The page's own process ended or restarted: keep every connection as it is.
        this.warnOnce(`cannot list the live sessions (${(error as Error).message})`);
      }
      if (!this.closed) this.timer = setTimeout(() => void poll(), this.options.pollMs);
    };
    void poll();
  }

  /** Stop looking for sessions and close every connection. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const { connection } of this.connections.values()) connection.close();
    this.connections.clear();
  }

  request(source: string, command: CommandBody): Promise<Outcome> {
    const connection = this.connections.get(source)?.connection;
    if (!connection) {
      return Promise.resolve({
        ok: false,
        code: 'session_closed',
        message: `session ${source} has ended; its runs can be viewed but not controlled`,
      });
    }
    return connection.request(command);
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

  /** Connect to the sessions new in `listed`; end the ones no longer in it. */
  private sync(listed: LiveSession[], receive: (message: HostToView) => void): void {
    const live = new Set<string>();
    for (const session of listed) {
      const key = sessionKey(session);
      live.add(key);
      if (!this.connections.has(key)) this.connect(key, session, receive);
    }
    for (const [key, { connection, label }] of this.connections) {
      if (live.has(key)) continue;
      this.connections.delete(key);
      connection.close();
      receive({ type: 'source', source: key, label, status: 'closed', ended: true });
    }
  }

  private connect(key: string, session: LiveSession, receive: (message: HostToView) => void): void {
    const label = `${session.project}/${session.run}`;
    // Same host name as the page, so the page's origin and the socket's host agree.
    const url = `ws://${this.location.hostname}:${session.port}/?token=${encodeURIComponent(session.token)}`;
    const connection = new Connection(
      () => this.options.openSocket(url),
      {
        status: (status) => {
          // A connection closed after its session left the list must not revive it.
          if (this.connections.get(key)?.connection === connection) {
            receive({ type: 'source', source: key, label, status, ended: false });
          }
        },
        message: (message) => receive({ type: 'server', source: key, message }),
        warn: (text) => console.warn(`OnTheFly (${label}): ${text}`),
      },
      this.options.connection,
    );
    this.connections.set(key, { connection, label });
    connection.start();
  }

  private warnOnce(text: string): void {
    if (text === this.lastWarning) return;
    this.lastWarning = text;
    console.warn(`OnTheFly: ${text}`);
  }
}
