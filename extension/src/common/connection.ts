/**
 * One dashboard connection to one session server, the same in the extension host (`ws`
 * package, token in a header) and in the page (browser WebSocket, token in the URL).
 *
 * It waits for `hello`, subscribes, and hands every state-changing message to its listener
 * exactly once and without gaps: duplicates (seq at or below the last one) are dropped; a
 * gap that no `coalesced` notice explains means frames were lost, so it reconnects and
 * subscribes again with `since` = the last seq it holds. A lost connection is retried with
 * exponential backoff, also with `since`, so a reconnect never leaves a hole. Each command
 * gets its own id and is answered exactly once (reply, error, timeout or disconnect).
 */
import type { ServerMessage } from '../protocol.gen';
import type { CommandBody, Outcome } from './messages';
import { parseServerMessage, ProtocolError } from './parse';
import type { ConnectionStatus, StreamEvent } from './state';

/** The part of a WebSocket (browser or `ws`) a connection uses. */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export interface ConnectionListener {
  /** The connection opened (after `hello`), is retrying, or was closed for good. */
  status(status: ConnectionStatus, detail: string): void;
  /** A message that changes the state: hello, snapshot, coalesced, events (deduplicated). */
  message(message: ServerMessage): void;
  /** Something the user or a developer should know about; the connection carries on. */
  warn(text: string): void;
}

export interface ConnectionOptions {
  /** `max_points` of the subscription: the size of each series in the snapshot. */
  maxPoints: number;
  initialDelayMs: number;
  maxDelayMs: number;
  requestTimeoutMs: number;
}

const DEFAULTS: ConnectionOptions = {
  maxPoints: 4000,
  initialDelayMs: 250,
  maxDelayMs: 5000,
  requestTimeoutMs: 120_000,
};
const OPEN = 1;
const SUBSCRIBE_ID = 'sub';

interface Pending {
  resolve(outcome: Outcome): void;
  timer: ReturnType<typeof setTimeout>;
}

export class Connection {
  private readonly options: ConnectionOptions;
  private socket: SocketLike | null = null;
  /** The session of the open connection (set by `hello`). */
  private session: string | null = null;
  /** The session the stream position belongs to: a different one starts from scratch. */
  private lastSession: string | null = null;
  private lastSeq = 0;
  /** Events are checked for gaps only once a snapshot (or `since`) fixed the starting seq. */
  private synced = false;
  private attempt = 0;
  private retry: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();

  /**
   * Args: `openSocket` creates a socket to the session (called on every (re)connect);
   * `listener` receives status changes and messages.
   * Example: `new Connection(() => new WebSocket(url), listener).start()`.
   */
  constructor(
    private readonly openSocket: () => SocketLike,
    private readonly listener: ConnectionListener,
    options: Partial<ConnectionOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  get isOpen(): boolean {
    return this.socket?.readyState === OPEN && this.session !== null;
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  /** Close for good: no more retries; pending commands fail with `disconnected`. */
  close(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    this.drop('closed');
    this.listener.status('closed', 'closed');
  }

  /** Send a command; resolves with its single outcome, never rejects. */
  request(command: CommandBody): Promise<Outcome> {
    if (!this.isOpen || !this.socket) {
      return Promise.resolve({
        ok: false,
        code: 'disconnected',
        message: 'not connected to the session (it may have ended); retrying in the background',
      });
    }
    const id = `c${this.nextId++}`;
    const socket = this.socket;
    return new Promise<Outcome>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        const seconds = this.options.requestTimeoutMs / 1000;
        resolve({ ok: false, code: 'timeout', message: `no answer to ${command.type} in ${seconds} s` });
      }, this.options.requestTimeoutMs);
      this.pending.set(id, { resolve, timer });
      socket.send(JSON.stringify({ ...command, id }));
    });
  }

  private connect(): void {
    this.retry = null;
    this.session = null;
    this.synced = false;
    this.listener.status('connecting', this.attempt ? `retry ${this.attempt}` : 'connecting');
    let socket: SocketLike;
    try {
      socket = this.openSocket();
    } catch (err) {
      this.scheduleRetry(`cannot open a socket: ${String(err)}`);
      return;
    }
    this.socket = socket;
    socket.onmessage = (event) => this.receive(event.data);
    socket.onerror = () => undefined; // the close event that follows says what happened
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.failPending('the connection to the session was lost');
      this.scheduleRetry(`closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`);
    };
  }

  private scheduleRetry(reason: string): void {
    if (this.stopped) return;
    const { initialDelayMs, maxDelayMs } = this.options;
    const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** this.attempt);
    this.attempt++;
    this.listener.status('connecting', `${reason}; retrying in ${delay} ms`);
    this.retry = setTimeout(() => this.connect(), delay);
  }

  private receive(data: unknown): void {
    let message: ServerMessage;
    try {
      message = parseServerMessage(typeof data === 'string' ? data : String(data));
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.listener.warn(`ignored a frame from the session: ${err.message}`);
      return;
    }
    switch (message.type) {
      case 'hello':
        return this.greet(message);
      case 'reply':
      case 'error':
        return this.answer(message);
      case 'snapshot':
        this.lastSeq = message.seq;
        this.synced = true;
        return this.listener.message(message);
      case 'coalesced':
        if (message.from_seq <= this.lastSeq + 1) {
          this.lastSeq = Math.max(this.lastSeq, message.to_seq);
        }
        return this.listener.message(message);
      case 'batch': {
        const events = message.events.filter((event) => this.admit(event));
        if (events.length) this.listener.message({ type: 'batch', events });
        return;
      }
      default:
        if (this.admit(message)) this.listener.message(message);
    }
  }

  private greet(hello: Extract<ServerMessage, { type: 'hello' }>): void {
    if (this.session !== null || !this.socket) return;
    if (this.lastSession !== null && this.lastSession !== hello.session) this.lastSeq = 0;
    this.session = this.lastSession = hello.session;
    this.attempt = 0;
    const since = this.lastSeq > 0 ? this.lastSeq : undefined;
    this.synced = since !== undefined;
    this.socket.send(
      JSON.stringify({ type: 'subscribe', id: SUBSCRIBE_ID, since, max_points: this.options.maxPoints }),
    );
    this.listener.message(hello);
    this.listener.status('open', hello.server);
  }

  /** Whether a stream event is the next one; a gap triggers a resubscription. */
  private admit(event: StreamEvent): boolean {
    if (!this.synced || event.seq <= this.lastSeq) return false;
    if (event.seq > this.lastSeq + 1) {
      this.listener.warn(`missed events ${this.lastSeq + 1}–${event.seq - 1}; resubscribing`);
      this.synced = false;
      this.socket?.close(4000, 'resync');
      return false;
    }
    this.lastSeq = event.seq;
    return true;
  }

  private answer(message: Extract<ServerMessage, { type: 'reply' | 'error' }>): void {
    if (message.id === SUBSCRIBE_ID) {
      if (message.type === 'error') this.listener.warn(`subscribe failed: ${message.error.message}`);
      return;
    }
    const pending = message.id === null ? undefined : this.pending.get(message.id);
    if (!pending || message.id === null) {
      if (message.type === 'error') {
        this.listener.warn(`session error ${message.error.code}: ${message.error.message}`);
      }
      return;
    }
    this.pending.delete(message.id);
    clearTimeout(pending.timer);
    pending.resolve(
      message.type === 'reply'
        ? { ok: true, data: message.data }
        : { ok: false, code: message.error.code, message: message.error.message },
    );
  }

  private drop(reason: string): void {
    const socket = this.socket;
    this.socket = null;
    this.session = null;
    if (socket) socket.close(1000, reason);
    this.failPending(`the connection was ${reason}`);
  }

  private failPending(message: string): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.resolve({ ok: false, code: 'disconnected', message });
      this.pending.delete(id);
    }
  }
}
