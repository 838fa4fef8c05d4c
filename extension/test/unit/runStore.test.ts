import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import type { HostToView } from '../../src/common/messages';
import type { SessionFile } from '../../src/host/discovery';
import { RunStore } from '../../src/host/runStore';
import { metricsEvent, runInfo, startFakeSession, until, type FakeSession } from '../support/fakeSession';

let fake: FakeSession | null = null;
let store: RunStore | null = null;
afterEach(async () => {
  store?.dispose();
  await fake?.close();
  fake = store = null;
});

function fileFor(session: FakeSession): SessionFile {
  return { key: `${process.pid}-${session.port}`, pid: process.pid, port: session.port, token: session.token, project: 'p', run: 'r', started_at: 1 };
}

test('the store connects with the token in a header and keeps every run', async () => {
  fake = await startFakeSession({
    onSubscribe: (_c, socket) =>
      socket.send(JSON.stringify({ type: 'snapshot', v: 1, session: 's1', seq: 0, time: 1, runs: [{ ...runInfo(), series: {}, health: [], hparam_changes: [], epoch_starts: [] }], logs: [] })),
  });
  store = new RunStore({ connection: { initialDelayMs: 20 } });
  const seen: HostToView[] = [];
  store.subscribe((m) => void seen.push(m));
  const file = fileFor(fake);
  store.addSession(file);
  await until(() => store?.state.sources[file.key]?.status === 'open', 5000, 'open');
  assert.equal(fake.handshakes[0].authorization, `Bearer ${fake.token}`);
  assert.equal(fake.handshakes[0].origin, undefined);
  // Events count from the snapshot on: one sent before it arrives is rightly dropped.
  await until(() => store?.state.sources[file.key].runs.r !== undefined, 5000, 'snapshot');
  fake.send(metricsEvent(1, 0, 0.5));
  await until(() => store?.state.sources[file.key].runs.r?.series.loss !== undefined, 5000, 'metrics');
  assert.ok(seen.some((m) => m.type === 'server' && m.message.type === 'metrics'), 'listeners get the relayed event');

  const outcome = await store.request(file.key, { type: 'pause', run: 'r' });
  assert.deepEqual(outcome, { ok: true, data: { state: 'pause' } });

  store.endSession(file.key);
  const source = store.state.sources[file.key];
  assert.equal(source.ended, true);
  assert.ok(source.runs.r, 'an ended session stays viewable');
  const after = await store.request(file.key, { type: 'resume' });
  assert.equal(!after.ok && after.code, 'session_closed');
});
