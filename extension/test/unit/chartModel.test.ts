import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SeriesData } from '../../src/common/series';
import { epochAxis, STEP_AXIS } from '../../src/webview/axis';
import { compose, MAX_NON_FINITE, nearestIndex, visibleRange, type ChartSeries } from '../../src/webview/chartModel';
import { chartOrder, chartSeries, axisTitle, type ChartRun } from '../../src/webview/panels/metrics';
import { newRun } from '../../src/common/state';
import { splice } from '../../src/webview/charts';
import { assignColors, runColor } from '../../src/webview/palette';

const data = (steps: number[], values: (number | null)[]): SeriesData => ({ steps, values, decimated: false, rev: 1 });

function series(id: string, points: SeriesData, extra: Partial<ChartSeries> = {}): ChartSeries {
  return {
    id, runKey: id, key: 'loss', split: 'train', label: id, color: '#fff', style: 'line', dense: true, data: points,
    map: STEP_AXIS, clock: null, startedAt: 0, epochStarts: [], ...extra,
  };
}

test('two runs are joined on x; a point one run lacks is undefined, its NaN stays a gap and is marked', () => {
  const a = series('a', data([1, 2, 3], [3, null, 1]));
  const b = series('b', data([2, 4], [5, 6]));
  const composed = compose([{ series: a, points: a.data }, { series: b, points: b.data }], null, 100, { kind: 'none' }, false);
  assert.deepEqual(composed.aligned, [
    [1, 2, 3, 4],
    [3, null, 1, undefined],
    [undefined, 5, undefined, 6],
  ]);
  assert.deepEqual(composed.nonFinite.map((n) => [n.series.id, n.step, n.x]), [['a', 2, 2]]);
});

test('a zoom keeps one neighbour each side; a log axis drops values it cannot place', () => {
  const a = series('a', data([1, 2, 3, 4, 5, 6], [1, 0, 2, -1, 3, 4]));
  assert.deepEqual(visibleRange(a.data.steps, STEP_AXIS, { lo: 3, hi: 4 }), [1, 5]);
  const composed = compose([{ series: a, points: a.data }], { lo: 3, hi: 4 }, 100, { kind: 'none' }, true);
  assert.deepEqual(composed.aligned, [[2, 3, 4, 5], [null, 2, null, 3]]);
  assert.equal(composed.nonFinite.length, 0, 'a value <= 0 is not a NaN');
});

test('each run maps its own steps to epochs; smoothing adds a line per dense series', () => {
  const a = series('a', data([0, 5, 10, 15], [4, 3, 2, 1]), { map: epochAxis([0, 10], 15) });
  const composed = compose([{ series: a, points: a.data }], null, 100, { kind: 'ema', weight: 0.5 }, false);
  assert.deepEqual(composed.aligned[0], [0, 0.5, 1, 1.5]);
  assert.equal(composed.aligned.length, 3, 'x, raw, smoothed');
  assert.equal(composed.drawn[0].smoothed?.length, 4);
});

test('non-finite marks are bounded per series; nearest points for the readout', () => {
  const n = 500;
  const steps = Array.from({ length: n }, (_, i) => i);
  const a = series('a', data(steps, steps.map((i) => (i >= 100 ? null : i))));
  assert.equal(compose([{ series: a, points: a.data }], null, 64, { kind: 'none' }, false).nonFinite.length, MAX_NON_FINITE);
  assert.equal(nearestIndex([1, 5, 9], 6.9), 1);
  assert.equal(nearestIndex([1, 5, 9], 7.1), 2);
  assert.equal(nearestIndex([], 3), -1);
});

test('a fetched full-resolution window is spliced into the local points', () => {
  const spliced = splice(data([0, 10, 20, 30], [0, 1, 2, 3]), { lo: 8, hi: 21, points: { steps: [8, 9, 10, 11, 21], values: [9, 9, 9, 9, 9] } });
  assert.deepEqual(spliced.steps, [0, 8, 9, 10, 11, 21, 30]);
});

test('chart order is stable: loss first, own metrics by name, built-ins last', () => {
  assert.deepEqual(chartOrder(['lr', 'acc', 'loss', 'grad_norm', 'f1', 'lr/group1']), ['loss', 'acc', 'f1', 'grad_norm', 'lr', 'lr/group1']);
  assert.equal(axisTitle('step_time'), 'step_time (s)');
  assert.equal(axisTitle('grad_norm'), 'grad_norm (L2)');
  assert.equal(axisTitle('loss'), 'loss');
});

test('compared runs get one colour each and their splits; a single run colours by split', () => {
  const run = (name: string): ChartRun['run'] => {
    const view = newRun({ run: name, project: 'p', name, parent: null, state: 'running', step: 2, epoch: 0, started_at: 0, latest: {}, alerts: [], config: {} });
    view.series = { loss: data([1, 2], [2, 1]), 'val/loss': data([2], [1.5]) };
    return view;
  };
  const single = chartSeries('loss', [{ key: 'a', label: 'a', run: run('a'), color: null }], 'step');
  assert.deepEqual(single.map((s) => [s.label, s.style, s.dash]), [['train', 'line', undefined], ['val', 'line+points', undefined]]);
  const compared = chartSeries('loss', [{ key: 'a', label: 'a', run: run('a'), color: runColor(0) }, { key: 'b', label: 'b', run: run('b'), color: runColor(1) }], 'step');
  assert.deepEqual(compared.map((s) => [s.id, s.label, s.color]), [
    ['a|loss', 'a', runColor(0)],
    ['a|val/loss', 'a · val', runColor(0)],
    ['b|loss', 'b', runColor(1)],
    ['b|val/loss', 'b · val', runColor(1)],
  ]);
  assert.deepEqual(compared[1].dash, [6, 3]);
  assert.deepEqual(assignColors(['x', 'y', 'z'], { y: 0, z: 5 }), { y: 0, z: 5, x: 1 });
});
