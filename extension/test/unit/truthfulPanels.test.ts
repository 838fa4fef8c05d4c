import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newRun, newSource } from '../../src/common/state';
import type { HparamChange, TestResult } from '../../src/protocol.gen';
import { entryNamed, restartOf } from '../../src/webview/runKeys';
import { restoreUi } from '../../src/webview/uiState';
import { describeOutcome } from '../../src/webview/panels/controls';
import { currentValues, describeValues } from '../../src/webview/panels/hparams';
import type { RunEntry } from '../../src/webview/panels/runPicker';
import { bareName, testTable } from '../../src/webview/panels/tests';
import { explorerHint } from '../../src/webview/panels/explorer';
import { parsePreviews, rgba } from '../../src/webview/samplePreview';

const result = (seq: number, loss: number | null, metrics: Record<string, number | null>): TestResult => ({
  type: 'test_result', v: 1, session: 's', run: 'r', seq, time: 0, label: `test_${seq}`, step: seq, loss, metrics, duration: 1,
});

test('test results have one column per metric: loss once, split prefixes dropped', () => {
  assert.equal(bareName('test_acc'), 'acc');
  assert.equal(bareName('test/f1'), 'f1');
  assert.equal(bareName('test_'), 'test_');
  const { columns, rows } = testTable([result(1, 0.5, { test_loss: 0.5, test_acc: 0.9 }), result(2, null, { loss: 0.4, acc: 0.91 })]);
  assert.deepEqual(columns, ['loss', 'acc']);
  assert.deepEqual(rows, [{ loss: 0.5, acc: 0.9 }, { loss: 0.4, acc: 0.91 }]);
});

const change = (seq: number, step: number, name: HparamChange['name'], value: HparamChange['new']): HparamChange => ({
  type: 'hparam_change', v: 1, session: 's', run: 'r', seq, time: 0, step, optimizer: 0, group: 0, name, old: null, new: value,
});

test('the hyperparameters shown are those in force after a set, before a step reports them', () => {
  const run = newRun({ run: 'r', project: 'p', name: 'r', parent: null, state: 'paused', step: 10, epoch: 0, started_at: 0, latest: { lr: 0.002 }, alerts: [], config: {} });
  run.series.lr = { steps: [9, 10], values: [0.002, 0.002], decimated: false, rev: 1 };
  run.hparams = [change(1, 4, 'lr', 0.1), change(2, 10, 'lr', 0.001), change(3, 10, 'weight_decay', 0.01)];
  assert.deepEqual(currentValues(run), { lr: 0.001, weight_decay: 0.01 });
  assert.equal(describeValues(currentValues(run)), 'lr 0.001 · weight_decay 0.01');
});

test('stop says it is stopping', () => {
  assert.equal(describeOutcome('stop', { ok: true, data: { state: 'stopping', step: 3667, epoch: 28, stopping: true } }), 'stop: stopping at step 3667 (epoch 28)');
});

const entry = (source: string, name: string, startedAt: number, ended: boolean): RunEntry => ({
  ref: { source, run: name }, name, project: 'demo', pill: ended ? 'finished' : 'running', startedAt, depth: 0, label: '', alerts: [], ended,
});

test('a run that ended is followed to its restart; ?run= names a run', () => {
  const old = entry('1-100', 'cnn', 10, true);
  const other = entry('2-200', 'mlp', 20, false);
  const restarted = entry('3-300', 'cnn', 30, false);
  assert.equal(restartOf([old, other], old), null);
  assert.equal(restartOf([old, other, restarted], old), restarted);
  assert.equal(entryNamed([old, restarted, other], 'demo/cnn'), restarted, 'the live one first');
  assert.equal(entryNamed([old, other], 'mlp'), other);
  assert.equal(entryNamed([old], 'nope'), null);
});

test('remembered UI state is checked field by field', () => {
  const ui = restoreUi({ tab: 'samples', logCharts: ['loss', 3], compared: 'x', colors: [], runs: null, axis: 'time' });
  assert.equal(ui.tab, 'samples');
  assert.deepEqual(ui.logCharts, ['loss']);
  assert.deepEqual(ui.compared, []);
  assert.deepEqual(ui.colors, {});
  assert.equal(ui.runs.sort, 'started');
  assert.equal(ui.axis, 'step');
  assert.equal(restoreUi({ tab: 'nope' }).tab, 'charts');
  assert.equal(newSource('k', 'k').ended, false);
});

test('the explorer\'s hint follows the scan', () => {
  assert.match(explorerHint('val', false), /^Scan val first/);
  assert.match(explorerHint('val', true), /is scanned: Project/);
});

test('previews are read from the wire; thumbnails become RGBA', () => {
  const gray = Buffer.from([0, 128, 255, 64]).toString('base64');
  const [image, text, bad] = parsePreviews({
    previews: [
      { index: 3, kind: 'image', width: 2, height: 2, channels: 1, pixels: gray, label: 7 },
      { index: 4, kind: 'text', text: 'a cat' },
      { index: 5, kind: 'image', width: 9, height: 9, channels: 3, pixels: gray },
      { kind: 'text' },
    ],
  });
  assert.equal(image.label, 7);
  assert.deepEqual([...rgba(image).slice(0, 8)], [0, 0, 0, 255, 128, 128, 128, 255]);
  assert.equal(text.text, 'a cat');
  assert.equal(bad.kind, 'error');
  assert.throws(() => parsePreviews({}), /no "previews" list/);
});
