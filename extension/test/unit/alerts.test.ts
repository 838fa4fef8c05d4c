import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseServerMessage } from '../../src/common/parse';
import { applyServerMessage, newSource } from '../../src/common/state';
import type { Alert } from '../../src/protocol.gen';
import { activeAlerts, alertId } from '../../src/webview/panels/alerts';
import { alertMarkers } from '../../src/webview/markers';
import { timeAt, formatDuration } from '../../src/webview/clock';

const examples = join(__dirname, '..', '..', '..', '..', 'tests', 'protocol_examples', 'valid', 'server');
const envelope = { v: 1 as const, session: 's', run: 'r', time: 10 };
const info = { run: 'r', project: 'p', name: 'r', parent: null, state: 'running' as const, step: 0, epoch: 0, started_at: 0, latest: {}, alerts: [], config: {} };

function alert(seq: number, kind: Alert['kind'], state: Alert['state'], step: number): Alert {
  return { ...envelope, type: 'alert', seq, kind, state, severity: kind === 'loss_spike' ? 'warning' : 'error', step, message: `${kind} at ${step}`, details: {} };
}

test('alerts raise and clear the run\'s alert state; the history keeps both, once each', () => {
  const source = newSource('k', 'k');
  applyServerMessage(source, { ...envelope, type: 'run_started', seq: 1, info });
  applyServerMessage(source, alert(2, 'nonfinite_loss', 'raised', 40));
  applyServerMessage(source, alert(3, 'loss_spike', 'raised', 50));
  applyServerMessage(source, alert(4, 'loss_spike', 'cleared', 150));
  applyServerMessage(source, alert(4, 'loss_spike', 'cleared', 150)); // a duplicate
  const run = source.runs.r;
  assert.deepEqual(run.info.alerts, ['nonfinite_loss']);
  assert.deepEqual(run.alerts.map((a) => a.seq), [2, 3, 4]);
  assert.deepEqual(activeAlerts(run).map((a) => a.step), [40]);
  assert.equal(alertId('key', run.alerts[0]), 'key#2');
  assert.deepEqual(alertMarkers(run.alerts).map((m) => [m.step, m.kind]), [[40, 'error'], [50, 'warning']]);
});

test('a config event sets the run\'s configuration; train metrics add clock anchors a second apart', () => {
  const source = newSource('k', 'k');
  applyServerMessage(source, { ...envelope, type: 'run_started', seq: 1, info });
  applyServerMessage(source, { ...envelope, type: 'config', seq: 2, values: { lr: 0.1, batch_size: 64 } });
  for (let step = 1; step <= 30; step++) {
    applyServerMessage(source, { ...envelope, type: 'metrics', seq: 2 + step, time: 100 + step * 0.25, split: 'train', step, epoch: 0, values: { loss: 1 } });
  }
  const run = source.runs.r;
  assert.deepEqual(run.info.config, { lr: 0.1, batch_size: 64 });
  assert.deepEqual(run.clock.steps, [1, 5, 9, 13, 17, 21, 25, 29]);
  assert.equal(timeAt(run.clock, 7), 101.75);
  assert.equal(timeAt(run.clock, 0), 100.25, 'before the first anchor: its time');
  assert.equal(timeAt({ steps: [], times: [] }, 3), null);
  assert.deepEqual([0.42, 41, 725, 11_000].map(formatDuration), ['0.4s', '41s', '12m 05s', '3h 03m']);
});

test('the snapshot example carries alert history, raised alerts, config and clock', () => {
  const source = newSource('k', 'k');
  applyServerMessage(source, parseServerMessage(readFileSync(join(examples, 'snapshot.json'), 'utf8')));
  const run = Object.values(source.runs)[0];
  assert.deepEqual(run.info.alerts, ['loss_spike']);
  assert.equal(run.alerts.length, 1);
  assert.equal(run.info.config.optimizer, 'SGD');
  assert.deepEqual(run.clock.steps, [0, 60, 120]);
});

test('a snapshot of a server without alerts or clocks reads them as empty', () => {
  const source = newSource('k', 'k');
  const { alerts: _a, config: _c, ...old } = info;
  applyServerMessage(source, { type: 'snapshot', v: 1, session: 's', seq: 0, time: 0, logs: [], runs: [{ ...old, series: {}, epoch_starts: [], hparam_changes: [], health: [], lineage: null }] } as never);
  assert.deepEqual(source.runs.r.info.alerts, []);
  assert.deepEqual(source.runs.r.clock, { steps: [], times: [] });
});
