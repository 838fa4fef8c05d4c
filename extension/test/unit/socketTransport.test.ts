import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { WebSocket } from 'ws';
import type { SocketLike } from '../../src/common/connection';
import type { HostToView } from '../../src/common/messages';
import { emptyState, type DashboardState } from '../../src/common/state';
import { HttpError, lostNotice, parseHubSessions, parseLiveSessions, SocketTransport, type LiveSession } from '../../src/webview/socketTransport';
import { applyHostMessage } from '../../src/webview/state';
import { runInfo, startFakeSession, until, type FakeSession } from '../support/fakeSession';

const fakes: FakeSession[] = [];
let transport: SocketTransport | null = null;
afterEach(async () => {
  transport?.close();
  transport = null;
  await Promise.all(fakes.splice(0).map((fake) => fake.close()));
});

const noStorage = { getItem: () => null, setItem: () => undefined };

async function fakeWithRun(session: string, token: string, run: string): Promise<FakeSession> {
  const fake = await startFakeSession({
    session,
    token,
    onSubscribe: (_c, socket) =>
      socket.send(JSON.stringify({ type: 'snapshot', v: 1, session, seq: 0, time: 1, runs: [{ ...runInfo(run), series: {}, health: [], hparam_changes: [], epoch_starts: [] }], logs: [] })),
  });
  fakes.push(fake);
  return fake;
}

function listed(fake: FakeSession, pid: number, run: string): LiveSession {
  return { pid, port: fake.port, project: 'p', run, session: `s${pid}`, token: fake.token, started_at: pid };
}

/** A transport over `sessions` (changed by the test), folding what it delivers into a state. */
function startTransport(sessions: () => unknown): { state: () => DashboardState; paths: string[]; notices: string[] } {
  let state = emptyState();
  const paths: string[] = [];
  const notices: string[] = [];
  transport = new SocketTransport({ hostname: '127.0.0.1', search: '?token=page-token' }, noStorage, {
    pollMs: 20,
    fetchJson: async (path) => {
      paths.push(path);
      return sessions();
    },
    openSocket: (url) => new WebSocket(url) as unknown as SocketLike,
    connection: { initialDelayMs: 20 },
  });
  transport.start((message: HostToView) => {
    if (message.type === 'notice') notices.push(message.text);
    state = applyHostMessage(state, message).state;
  });
  return { state: () => state, paths, notices };
}

test('the page connects to every listed session with its own token, keyed by pid and port', async () => {
  const a = await fakeWithRun('sa', 'token-a', 'first');
  const b = await fakeWithRun('sb', 'token-b', 'second');
  const live = [listed(a, 101, 'first'), listed(b, 102, 'second')];
  const page = startTransport(() => ({ sessions: live }));
  const keyA = `101-${a.port}`;
  const keyB = `102-${b.port}`;
  await until(() => page.state().sources[keyA]?.runs.first !== undefined, 5000, 'run of a');
  await until(() => page.state().sources[keyB]?.runs.second !== undefined, 5000, 'run of b');
  assert.equal(page.paths[0], '/sessions?token=page-token');
  assert.equal(page.state().sources[keyB].label, 'p/second');
  assert.equal(page.state().sources[keyB].status, 'open');
  // Each fake refuses any token but its own: both handshakes went through.
  assert.equal(a.handshakes.length, 1);
  assert.equal(b.handshakes.length, 1);

  const outcome = await transport?.request(keyB, { type: 'pause', run: 'second' });
  assert.deepEqual(outcome, { ok: true, data: { state: 'pause' } });
  assert.equal((await b.waitFor('pause')).run, 'second');
  assert.equal(a.commands.filter((c) => c.type === 'pause').length, 0);
});

test('a session that leaves the list is ended, its runs stay, commands to it fail', async () => {
  const a = await fakeWithRun('sa', 'token-a', 'first');
  const b = await fakeWithRun('sb', 'token-b', 'second');
  let live = [listed(a, 101, 'first'), listed(b, 102, 'second')];
  const page = startTransport(() => ({ sessions: live }));
  const keyB = `102-${b.port}`;
  await until(() => page.state().sources[keyB]?.status === 'open', 5000, 'b open');
  live = [listed(a, 101, 'first')];
  await until(() => page.state().sources[keyB]?.ended === true, 5000, 'b ended');
  const source = page.state().sources[keyB];
  assert.equal(source.status, 'closed');
  assert.equal(source.label, 'p/second');
  assert.ok(source.runs.second, 'the ended session stays viewable');
  await until(() => b.clients.size === 0, 5000, 'b disconnected');
  const outcome = await transport?.request(keyB, { type: 'resume' });
  assert.equal(!outcome?.ok && outcome?.code, 'session_closed');
  assert.equal(page.state().sources[`101-${a.port}`].status, 'open');
});

test('when its own server stops answering, the page says so, keeps what it reaches and stops retrying the rest', async () => {
  const a = await fakeWithRun('sa', 'token-a', 'first');
  const b = await fakeWithRun('sb', 'token-b', 'second');
  let failing = false;
  const page = startTransport(() => {
    if (failing) throw new HttpError(401, '/sessions answered HTTP 401');
    return { sessions: [listed(a, 101, 'first'), listed(b, 102, 'second')] };
  });
  const [keyA, keyB] = [`101-${a.port}`, `102-${b.port}`];
  await until(() => page.state().sources[keyA]?.status === 'open' && page.state().sources[keyB]?.status === 'open', 5000, 'open');
  await b.close(); // the second run ends with the page's own server: no list says so any more
  failing = true;
  await until(() => page.notices.at(-1)?.startsWith('The run that served this page restarted with a new token') === true, 5000, 'notice');
  assert.match(page.notices.at(-1) ?? '', /onthefly dashboard/);
  await until(() => page.state().sources[keyB]?.ended === true, 5000, 'b given up');
  assert.equal(page.state().sources[keyA].status, 'open', 'a still reached');
  assert.equal(page.state().sources[keyA].ended, false);
  failing = false;
  await until(() => page.notices.at(-1) === '', 5000, 'notice taken back');
});

test('served by the hub, the page connects to each listed path with the hub\'s token only', async () => {
  const hub = await fakeWithRun('hub-session', 'hub-token', 'first');
  const listing = (live: boolean): unknown => ({
    hub: true,
    sessions: [{ key: '7-9', kind: 'session', project: 'p', run: 'first', started_at: 1, live, path: '/ws/7-9' }],
  });
  let live = true;
  const opened: string[] = [];
  let state = emptyState();
  const notices: string[] = [];
  transport = new SocketTransport({ hostname: '127.0.0.1', port: String(hub.port), search: '?token=hub-token&run=p/first' }, noStorage, {
    pollMs: 20,
    fetchJson: async () => listing(live),
    openSocket: (url) => {
      opened.push(url);
      return new WebSocket(url) as unknown as SocketLike;
    },
    connection: { initialDelayMs: 20 },
  });
  transport.start((message) => {
    if (message.type === 'notice') notices.push(message.text);
    state = applyHostMessage(state, message).state;
  });
  assert.equal(transport.wantedRun(), 'p/first');
  await until(() => state.sources['7-9']?.runs.first !== undefined, 5000, 'run through the hub');
  assert.equal(opened[0], `ws://127.0.0.1:${hub.port}/ws/7-9?token=hub-token`);
  live = false;
  await until(() => state.sources['7-9']?.ended === true, 5000, 'ended');
  assert.equal(state.sources['7-9'].status, 'open', 'the hub keeps serving what it saw');
  assert.equal(opened.length, 1);
});

test('a page opened without its token says how to open it', () => {
  const bare = new SocketTransport({ hostname: '127.0.0.1', search: '' }, noStorage);
  assert.throws(() => bare.start(() => undefined), /needs its token/);
});

test('the hub list parser keeps entries with a socket path only', () => {
  const good = { key: 'k', kind: 'session', project: 'p', run: 'r', started_at: 0, live: true, path: '/ws/k' };
  assert.deepEqual(parseHubSessions({ hub: true, sessions: [good, { ...good, path: 'http://elsewhere/' }, { ...good, live: 'yes' }] }), [good]);
  assert.match(lostNotice(true, null), /hub stopped answering/);
  assert.match(lostNotice(false, null), /has ended \(or restarted at a new address\)/);
});

test('the list parser skips malformed entries and rejects a malformed answer', () => {
  const good = { pid: 1, port: 2, project: 'p', run: 'r', session: 's', token: 't', started_at: 0 };
  assert.deepEqual(parseLiveSessions({ sessions: [good, { ...good, port: '2' }, null, { pid: 1 }] }), [good]);
  assert.throws(() => parseLiveSessions([good]), /expected \{"sessions"/);
});
