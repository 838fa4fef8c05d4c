/**
 * A real websocket server speaking the session protocol's handshake, for connection tests:
 * checks the bearer token, sends `hello`, records every command, and lets a test push
 * frames or drop connections.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { extname, join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';

export interface FakeSession {
  port: number;
  token: string;
  /** Every command received, in order. */
  commands: Record<string, unknown>[];
  /** Sockets currently open. */
  clients: Set<WebSocket>;
  /** Headers of each accepted connection. */
  handshakes: IncomingMessage['headers'][];
  send(frame: unknown): void;
  /** Close every client connection abruptly (as a crashed or restarted network would). */
  dropClients(): void;
  /** Resolves when a command of `type` has arrived (at least `count` of them). */
  waitFor(type: string, count?: number): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface FakeOptions {
  session?: string;
  token?: string;
  /** Answer to each command other than subscribe (default: a reply echoing the type). */
  answer?: (command: Record<string, unknown>, socket: WebSocket) => void;
  /** What to send after the subscribe reply (default: an empty snapshot at seq 0). */
  onSubscribe?: (command: Record<string, unknown>, socket: WebSocket) => void;
  /**
   * Also serve this folder's files over HTTP (the dashboard page), token in `?token=`, and
   * `GET /sessions?token=…` listing this one session, as a session server does.
   */
  httpRoot?: string;
  /** What `GET /sessions` lists (default: this one session). */
  listed?: (own: Record<string, unknown>) => Record<string, unknown>[];
}

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

function serveFiles(root: string, session: string, token: string, listed?: FakeOptions['listed']): Server {
  return createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (url.pathname === '/sessions') {
      if (url.searchParams.get('token') !== token) return void response.writeHead(401).end();
      const port = request.socket.localPort;
      const own = { pid: process.pid, port, project: 'p', run: 'r', session, token, started_at: 1 };
      response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      return void response.end(JSON.stringify({ sessions: listed ? listed(own) : [own] }));
    }
    const name = url.pathname.slice(1) || 'index.html';
    try {
      if (name.includes('..') || name.includes('/')) throw new Error('outside');
      const body = readFileSync(join(root, name));
      response.writeHead(200, { 'Content-Type': TYPES[extname(name)] ?? 'application/octet-stream' });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
}

export async function startFakeSession(options: FakeOptions = {}): Promise<FakeSession> {
  const token = options.token ?? 'secret-token';
  const session = options.session ?? 's1';
  const authorized = ({ req }: { req: IncomingMessage }): boolean =>
    req.headers.authorization === `Bearer ${token}` ||
    new URL(req.url ?? '/', 'http://x').searchParams.get('token') === token;
  const http = options.httpRoot ? serveFiles(options.httpRoot, session, token, options.listed) : null;
  const server = http
    ? new WebSocketServer({ server: http, verifyClient: authorized })
    : new WebSocketServer({ host: '127.0.0.1', port: 0, verifyClient: authorized });
  if (http) await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', () => resolve()));
  else await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const address = (http ?? server).address();
  if (typeof address === 'string' || address === null) throw new Error('no port');
  const waiters: (() => void)[] = [];
  const fake: FakeSession = {
    port: address.port,
    token,
    commands: [],
    clients: new Set(),
    handshakes: [],
    send(frame) {
      for (const client of fake.clients) client.send(JSON.stringify(frame));
    },
    dropClients() {
      for (const client of fake.clients) client.terminate();
      fake.clients.clear();
    },
    waitFor(type, count = 1) {
      return new Promise((resolve) => {
        const check = (): boolean => {
          const found = fake.commands.filter((c) => c.type === type);
          if (found.length >= count) {
            resolve(found[count - 1]);
            return true;
          }
          return false;
        };
        if (!check()) waiters.push(() => void check());
      });
    },
    close() {
      for (const client of fake.clients) client.terminate();
      return new Promise((resolve) => server.close(() => (http ? http.close(() => resolve()) : resolve())));
    },
  };
  server.on('connection', (socket, request) => {
    fake.clients.add(socket);
    fake.handshakes.push(request.headers);
    socket.on('close', () => fake.clients.delete(socket));
    socket.send(JSON.stringify({ type: 'hello', v: 1, session, server: 'fake', project: 'p', time: 1, max_frame_bytes: 1 << 20 }));
    socket.on('message', (data) => {
      const command = JSON.parse(String(data)) as Record<string, unknown>;
      fake.commands.push(command);
      if (command.type === 'subscribe') {
        socket.send(JSON.stringify({ type: 'reply', id: command.id, data: {} }));
        if (options.onSubscribe) options.onSubscribe(command, socket);
        else if (command.since === undefined) {
          socket.send(JSON.stringify({ type: 'snapshot', v: 1, session, seq: 0, time: 1, runs: [], logs: [] }));
        }
      } else if (options.answer) {
        options.answer(command, socket);
      } else {
        socket.send(JSON.stringify({ type: 'reply', id: command.id, data: { state: command.type } }));
      }
      for (const waiter of waiters.splice(0)) waiter();
    });
  });
  return fake;
}

/** A stream event of run `r` with sequence number `seq`. */
/**
 * An `answer` that refuses every command (`unsupported`), as a real session refuses what a
 * run cannot do: for pages whose panels ask things (history, checkpoints, lineage, …) whose
 * replies a scripted session does not model.
 */
export function refuse(command: Record<string, unknown>, socket: WebSocket): void {
  const error = { code: 'unsupported', message: `this scripted session answers no ${String(command.type)}` };
  socket.send(JSON.stringify({ type: 'error', id: command.id, error }));
}

export function metricsEvent(seq: number, step: number, value: number, run = 'r'): Record<string, unknown> {
  return { type: 'metrics', v: 1, session: 's1', run, seq, time: seq, split: 'train', step, epoch: 0, values: { loss: value } };
}

export function runInfo(run = 'r', state = 'running'): Record<string, unknown> {
  return { run, project: 'p', name: run, parent: null, state, step: 0, epoch: 0, started_at: 1, latest: {}, alerts: [], config: {} };
}

/** Poll `condition` every 10 ms until it holds (fails the test after `ms`). */
export async function until(condition: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
