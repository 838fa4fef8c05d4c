import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyServerMessage, newSource, type DashboardState } from '../../src/common/state';
import { listRuns } from '../../src/webview/panels/runPicker';
import { bestDirection, cellText, columnsOf, filterRows, runRows, sortRows, summarize } from '../../src/webview/panels/runsTable';

test('best is the lowest loss or error, the highest score; other metrics have none', () => {
  assert.deepEqual(['loss', 'val/loss', 'val/mse', 'wer', 'acc', 'val/f1', 'test/auc', 'lr', 'grad_norm', 'reward'].map(bestDirection), [
    'min', 'min', 'min', 'min', 'max', 'max', 'max', null, null, null,
  ]);
  assert.deepEqual(summarize([3, null, 1, 2], 'min'), { last: 2, best: 1 });
  assert.deepEqual(summarize([0.5, 0.9, 0.7], 'max'), { last: 0.7, best: 0.9 });
  assert.deepEqual(summarize([1, 2], null), { last: 2, best: null });
});

function stateOf(runs: { key: string; name: string; loss: number[]; lr: number; state?: 'running' | 'finished' }[]): DashboardState {
  const state: DashboardState = { sources: {} };
  runs.forEach(({ key, name, loss, lr, state: runState = 'running' }, i) => {
    const source = (state.sources[key] = newSource(key, key));
    source.status = 'open';
    const envelope = { v: 1 as const, session: key, run: name, time: i };
    const info = { run: name, project: 'p', name, parent: null, state: runState, step: 0, epoch: 0, started_at: i, latest: {}, alerts: [], config: {} };
    applyServerMessage(source, { ...envelope, type: 'run_started', seq: 1, info });
    applyServerMessage(source, { ...envelope, type: 'config', seq: 2, values: { lr, optimizer: 'SGD' } });
    loss.forEach((value, step) => applyServerMessage(source, { ...envelope, type: 'metrics', seq: 3 + step, split: 'train', step, epoch: 0, values: { loss: value } }));
  });
  return state;
}

test('rows hold each run\'s last and best values and its config; columns follow', () => {
  const state = stateOf([
    { key: 'a', name: 'slow', loss: [3, 1, 2], lr: 0.001 },
    { key: 'b', name: 'fast', loss: [2, 0.5], lr: 0.01, state: 'finished' },
  ]);
  const rows = runRows(state, listRuns(state), (ref) => ref.source);
  const slow = rows.find((r) => r.name === 'slow');
  assert.deepEqual(slow?.metrics.loss, { last: 2, best: 1 });
  assert.deepEqual(slow?.config, { lr: 0.001, optimizer: 'SGD' });
  const columns = columnsOf(rows);
  assert.deepEqual(columns.map((c) => c.id), ['run', 'state', 'step', 'alerts', 'started', 'm:loss:last', 'm:loss:best', 'c:lr', 'c:optimizer']);
  const best = columns.find((c) => c.id === 'm:loss:best');
  assert.ok(best);
  assert.deepEqual(sortRows(rows, best, false).map((r) => r.name), ['fast', 'slow']);
  assert.deepEqual(sortRows(rows, columns.find((c) => c.id === 'c:lr'), true).map((r) => r.name), ['fast', 'slow']);
  assert.equal(cellText(best, rows[0]), rows[0].name === 'fast' ? '0.5' : '1');
  assert.deepEqual(filterRows(rows, 'lr=0.01').map((r) => r.name), ['fast']);
  assert.deepEqual(filterRows(rows, 'p/slow running').map((r) => r.name), ['slow']);
  assert.deepEqual(filterRows(rows, 'finished fast').map((r) => r.name), ['fast']);
  assert.equal(filterRows(rows, 'nothing').length, 0);
});

test('empty cells sort last whichever the direction', () => {
  const state = stateOf([
    { key: 'a', name: 'x', loss: [], lr: 0.1 },
    { key: 'b', name: 'y', loss: [1], lr: 0.1 },
  ]);
  const rows = runRows(state, listRuns(state), (ref) => ref.source);
  const last = columnsOf(rows).find((c) => c.id === 'm:loss:last');
  assert.deepEqual(sortRows(rows, last, true).map((r) => r.name), ['y', 'x']);
  assert.deepEqual(sortRows(rows, last, false).map((r) => r.name), ['y', 'x']);
});
