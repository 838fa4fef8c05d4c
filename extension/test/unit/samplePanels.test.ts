import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HistogramReply, ScanProgress, SelectReply } from '../../src/protocol.gen';
import { boxFromDrag, dataMapCaption, parseFraction } from '../../src/webview/panels/dataMap';
import { explorerCaption } from '../../src/webview/panels/explorer';
import { histogramCaption } from '../../src/webview/panels/lossHistogram';
import { describeSelection } from '../../src/webview/panels/selections';
import { describeExport, nextSorting, pageLabel } from '../../src/webview/panels/sampleTable';
import { isLive, needsRefresh } from '../../src/webview/panels/samples';
import { describeScan, describeScanReply } from '../../src/webview/panels/scanBar';
import { dataMapCloud, explorerCloud } from '../../src/webview/sampleData';

const progress = (state: ScanProgress['state'], done: number, total: number | null): ScanProgress => ({
  type: 'scan_progress', v: 1, session: 's', run: 'r', seq: 1, time: 0, split: 'val', state, done, total, elapsed: 1.5,
});

test('scan progress reads as one line per state', () => {
  assert.equal(describeScan(undefined), '');
  assert.equal(describeScan(progress('running', 256, 1024)), 'scanning val: 256 / 1024 (25 %) · 1.5 s');
  assert.equal(describeScan(progress('running', 256, null)), 'scanning val: 256 · 1.5 s');
  assert.equal(describeScan(progress('done', 1024, 1024)), 'scan of val done: 1024 samples in 1.5 s');
  assert.equal(describeScan(progress('cancelled', 0, null)), 'scan of val cancelled');
});

test('a scan reply says how many samples at which step, or that it was cancelled or failed', () => {
  const reply = { split: 'train', source: 'scan', step: 12, size: 8192, duration: 2, samples_per_s: 4000.4, loss_mean: 0.5, loss_min: 0, loss_max: 3, cancelled: false } as const;
  const done = { ok: true as const, data: reply };
  assert.equal(describeScanReply('train', done), 'scan train: 8192 samples at step 12, 4000 samples/s, mean loss 0.5');
  assert.equal(describeScanReply('train', { ok: true, data: { split: 'train', cancelled: true } }), 'scan train: cancelled');
  assert.equal(describeScanReply('val', { ok: false, code: 'busy', message: 'a scan is running' }), 'scan val failed: a scan is running (busy)');
});

test('the histogram caption names split, source, step and what falls outside', () => {
  const hist: HistogramReply = { split: 'train', source: 'training', step: 7, edges: [0, 1, 2], counts: [3, 1], total: 10, below: 2, above: 1, missing: 3, min: 0, max: 2, mean: 0.75 };
  assert.equal(histogramCaption(hist), 'train · training at step 7 · 10 samples · mean loss 0.75 · 3 outside the range · 3 without a loss');
  const selected: SelectReply = { name: 'hard', split: 'train', source: 'training', step: 7, criterion: { kind: 'top', k: 12 }, size: 12, created: 1, loss_mean: 4, loss_min: 2, loss_max: 7.5, preview: [] };
  assert.equal(describeSelection({ ok: true, data: selected }), 'selected hard: 12 samples, loss 2 – 7.5');
  assert.equal(describeSelection({ ok: true, data: { ...selected, name: 'train-hard', size: 0, loss_min: null, loss_max: null } }), 'selected train-hard: 0 samples');
  assert.equal(describeSelection({ ok: false, code: 'invalid_state', message: 'never scanned' }), 'select failed: never scanned (invalid_state)');
});

test('the region share must be in (0, 1]', () => {
  assert.deepEqual(parseFraction('0.25'), { fraction: 0.25 });
  assert.deepEqual(parseFraction('1'), { fraction: 1 });
  for (const bad of ['0', '1.5', '', 'abc', '-0.1']) assert.deepEqual(parseFraction(bad), { error: `region share "${bad}" is not a number in (0, 1]` });
});

test('a box dragged on the data map becomes confidence and variability bounds', () => {
  // A 240 x 140 canvas: the plot is 200 x 118 CSS pixels inside margins of 34/6/4/18.
  const size = { width: 240, height: 140 };
  const extent = { x0: 0, x1: 0.5, y0: 0, y1: 1 };
  const box = boxFromDrag({ x: 134, y: 63 }, { x: 34, y: 122 }, size, extent);
  assert.deepEqual(box, { confidence_min: 0, confidence_max: 0.5, variability_min: 0, variability_max: 0.25 });
  // Beyond the plot the bounds stay within [0, 1] and the extent; a click is no box.
  const wide = boxFromDrag({ x: -50, y: -50 }, { x: 400, y: 400 }, size, { x0: 0, x1: 2, y0: -1, y1: 2 });
  assert.deepEqual(wide, { confidence_min: 0, confidence_max: 1, variability_min: 0, variability_max: 1 });
  assert.equal(boxFromDrag({ x: 50, y: 50 }, { x: 52, y: 90 }, size, extent), null);
});

test('scatter captions say when the points are a subsample', () => {
  const map = dataMapCloud({ split: 'train', source: 'training', step: 5, total: 3, index: [0, 1], confidence: [1, 1], variability: [0, 0], correct: [1, 1], loss: [0.5, 1] });
  assert.equal(dataMapCaption(map), '2 of 3 samples · training statistics at step 5');
  const explorer = explorerCloud({ split: 'val', source: 'scan', step: 5, total: 2, method: 'umap', index: [0, 1], x: [0, 1], y: [0, 1], loss: [1, 2] });
  assert.equal(explorerCaption(explorer), '2 samples of val · umap of the scan at step 5');
});

test('clicking a column header sorts by it descending, again reverses', () => {
  const byLoss = { sort: 'loss' as const, descending: true };
  assert.deepEqual(nextSorting(byLoss, 'loss'), { sort: 'loss', descending: false });
  assert.deepEqual(nextSorting({ sort: 'loss', descending: false }, 'index'), { sort: 'index', descending: true });
  assert.equal(pageLabel({ offset: 50, total: 120, rows: new Array(50) }), 'rows 51–100 of 120');
  assert.equal(pageLabel({ offset: 0, total: 0, rows: [] }), 'no rows');
});

test('an export shows the written path or the error', () => {
  assert.equal(describeExport({ ok: true, data: { name: 'hard', path: '/tmp/hard.csv', rows: 10, bytes: 2048, format: 'csv' } }), 'export: /tmp/hard.csv (10 rows, 2.0 KiB)');
  assert.equal(describeExport({ ok: false, code: 'unsupported', message: 'folder does not exist' }), 'export failed: folder does not exist (unsupported)');
});

test('views are fetched again when the run pauses or comes back, not on every draw', () => {
  assert.equal(needsRefresh({ key: 'a', pill: 'running' }, 'a', 'paused'), true);
  assert.equal(needsRefresh({ key: 'a', pill: 'disconnected' }, 'a', 'running'), true);
  assert.equal(needsRefresh({ key: 'a', pill: null }, 'a', 'running'), true);
  assert.equal(needsRefresh({ key: 'a', pill: 'paused' }, 'a', 'paused'), false);
  assert.equal(needsRefresh({ key: 'a', pill: 'paused' }, 'a', 'running'), false);
  assert.equal(needsRefresh({ key: 'a', pill: 'running' }, 'b', 'paused'), false, 'a new run is fetched by the panels themselves');
  assert.equal(isLive('testing'), true);
  assert.equal(isLive('finished'), false);
  assert.equal(isLive('disconnected'), false);
});
