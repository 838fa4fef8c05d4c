import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newRun, newSource, type DashboardState, type RunView } from '../../src/common/state';
import { alerting, summarize } from '../../src/host/statusBar';
import { runInfo } from '../support/fakeSession';
import type { RunInfo } from '../../src/protocol.gen';

function run(state: string): RunView {
  return newRun(runInfo('r', state) as unknown as RunInfo);
}

test('the status bar counts live runs by state, ignoring ended sessions', () => {
  const state: DashboardState = { sources: {} };
  assert.equal(summarize(state), 'no live runs');
  const a = (state.sources.a = newSource('a', 'a'));
  a.status = 'open';
  a.runs = { r: run('running'), s: run('paused') };
  const b = (state.sources.b = newSource('b', 'b'));
  b.runs = { r: run('running') }; // still connecting: shown as disconnected
  const c = (state.sources.c = newSource('c', 'c'));
  c.ended = true;
  c.runs = { r: run('running') };
  assert.equal(summarize(state), '1 running, 1 paused, 1 disconnected');
});

test('runs with alerts are counted and named', () => {
  const state: DashboardState = { sources: {} };
  const a = (state.sources.a = newSource('a', 'a'));
  a.status = 'open';
  const sick = run('running');
  sick.info.alerts = ['nonfinite_loss', 'stalled'];
  a.runs = { r: sick, s: run('running') };
  assert.equal(summarize(state), '2 running · 1 alert');
  assert.deepEqual(alerting(state), ['p/r: nonfinite_loss, stalled']);
});
