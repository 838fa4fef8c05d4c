import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { WebSocket } from 'ws';
import { Connection, type ConnectionListener, type SocketLike } from '../../src/common/connection';
import type { ServerMessage } from '../../src/protocol.gen';
import type { ConnectionStatus } from '../../src/common/state';
import { metricsEvent, startFakeSession, until, type FakeSession } from '../support/fakeSession';

interface Recorder extends ConnectionListener {
  messages: ServerMessage[];
  statuses: ConnectionStatus[];
  warnings: string[];
  seqs(): number[];
}

function recorder(): Recorder {
  const r: Recorder = {
    messages: [],
    statuses: [],
    warnings: [],
    status: (s) => void r.statuses.push(s),
    message: (m) => void r.messages.push(m),
    warn: (t) => void r.warnings.push(t),
    seqs: () =>
      r.messages.flatMap((m) => (m.type === 'batch' ? m.events.map((e) => e.seq) : 'run' in m ? [m.seq] : [])),
  };
  return r;
}

let fake: FakeSession | null = null;
let connection: Connection | null = null;
afterEach(async () => {
  connection?.close();
  await fake?.close();
  fake = connection = null;
});

function connect(session: FakeSession, listener: ConnectionListener, token = session.token): Connection {
  const open = (): SocketLike =>
    new WebSocket(`ws://127.0.0.1:${session.port}/`, { headers: { Authorization: `Bearer ${token}` } }) as unknown as SocketLike;
  const c = new Connection(open, listener, { initialDelayMs: 20, maxDelayMs: 100, requestTimeoutMs: 2000, maxPoints: 123 });
  c.start();
  return c;
}

test('subscribes after hello with its point budget, then passes the stream on in order', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  const subscribe = await fake.waitFor('subscribe');
  assert.equal(subscribe.max_points, 123);
  assert.equal(subscribe.since, undefined);
  await until(() => r.messages.some((m) => m.type === 'snapshot'), 5000, 'snapshot');
  fake.send(metricsEvent(1, 0, 1));
  fake.send({ type: 'batch', events: [metricsEvent(2, 1, 1), metricsEvent(3, 2, 1)] });
  await until(() => r.seqs().length === 3, 5000, 'three events');
  assert.deepEqual(r.seqs(), [1, 2, 3]);
  assert.ok(r.statuses.includes('open'));
  assert.equal(fake.handshakes[0].authorization, `Bearer ${fake.token}`);
});

test('drops duplicates by seq', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  await until(() => r.messages.some((m) => m.type === 'snapshot'));
  fake.send(metricsEvent(1, 0, 1));
  fake.send(metricsEvent(1, 0, 1));
  fake.send({ type: 'batch', events: [metricsEvent(1, 0, 1), metricsEvent(2, 1, 1)] });
  await until(() => r.seqs().includes(2));
  assert.deepEqual(r.seqs(), [1, 2]);
});

test('reconnects after a lost connection and asks only for what it missed', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  await until(() => r.messages.some((m) => m.type === 'snapshot'));
  fake.send({ type: 'batch', events: [metricsEvent(1, 0, 1), metricsEvent(2, 1, 1)] });
  await until(() => r.seqs().length === 2);
  fake.dropClients();
  const again = await fake.waitFor('subscribe', 2);
  assert.equal(again.since, 2, 'resubscribes from the last seq it holds');
  assert.ok(r.statuses.includes('connecting'));
  fake.send({ type: 'batch', events: [metricsEvent(2, 1, 1), metricsEvent(3, 2, 1)] });
  await until(() => r.seqs().includes(3));
  assert.deepEqual(r.seqs(), [1, 2, 3], 'no duplicate, no gap');
});

test('a gap that no coalesced notice explains triggers a resubscription with since', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  await until(() => r.messages.some((m) => m.type === 'snapshot'));
  fake.send(metricsEvent(1, 0, 1));
  fake.send(metricsEvent(5, 4, 1));
  const again = await fake.waitFor('subscribe', 2);
  assert.equal(again.since, 1);
  assert.deepEqual(r.seqs(), [1], 'the event after the gap is not applied');
  assert.match(r.warnings.join('\n'), /missed events 2–4/);
});

test('a coalesced notice explains its gap', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  await until(() => r.messages.some((m) => m.type === 'snapshot'));
  fake.send(metricsEvent(1, 0, 1));
  fake.send({ type: 'coalesced', from_seq: 2, to_seq: 9, dropped: 8 });
  fake.send(metricsEvent(10, 9, 1));
  await until(() => r.seqs().includes(10));
  assert.equal(fake.commands.filter((c) => c.type === 'subscribe').length, 1, 'no resubscription');
});

test('each command gets its own id and exactly one outcome', async () => {
  fake = await startFakeSession({
    answer: (command, socket) => {
      if (command.type === 'pause') socket.send(JSON.stringify({ type: 'reply', id: command.id, data: { state: 'paused', step: 7, epoch: 0 } }));
      else socket.send(JSON.stringify({ type: 'error', id: command.id, error: { code: 'invalid_state', message: 'not paused' } }));
    },
  });
  const r = recorder();
  connection = connect(fake, r);
  await until(() => connection?.isOpen === true);
  const [paused, resumed] = await Promise.all([connection.request({ type: 'pause', run: 'r' }), connection.request({ type: 'resume' })]);
  assert.deepEqual(paused, { ok: true, data: { state: 'paused', step: 7, epoch: 0 } });
  assert.deepEqual(resumed, { ok: false, code: 'invalid_state', message: 'not paused' });
  const ids = fake.commands.filter((c) => c.type !== 'subscribe').map((c) => c.id);
  assert.equal(new Set(ids).size, 2);
  assert.equal(fake.commands.find((c) => c.type === 'pause')?.run, 'r');
});

test('a command without a connection, or cut off by a drop, fails with disconnected', async () => {
  fake = await startFakeSession({ answer: () => fake?.dropClients() });
  const r = recorder();
  connection = connect(fake, r);
  await until(() => connection?.isOpen === true);
  const lost = await connection.request({ type: 'stop' });
  assert.equal(lost.ok, false);
  assert.equal(!lost.ok && lost.code, 'disconnected');
  connection.close();
  const closed = await connection.request({ type: 'stop' });
  assert.equal(!closed.ok && closed.code, 'disconnected');
  assert.equal(r.statuses.at(-1), 'closed');
});

test('a wrong token keeps retrying with backoff and never opens', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r, 'wrong');
  await until(() => r.statuses.filter((s) => s === 'connecting').length >= 3, 5000, 'three attempts');
  assert.ok(!r.statuses.includes('open'));
});

test('unreadable frames are reported and skipped', async () => {
  fake = await startFakeSession();
  const r = recorder();
  connection = connect(fake, r);
  await until(() => r.messages.some((m) => m.type === 'snapshot'));
  for (const client of fake.clients) client.send('not json');
  fake.send(metricsEvent(1, 0, 1));
  await until(() => r.seqs().includes(1));
  assert.match(r.warnings.join('\n'), /frame is not JSON/);
});
