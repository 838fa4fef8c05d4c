import assert from 'node:assert/strict';
import { test } from 'node:test';
import { binAt, binsForWidth, dragRange, MAX_BINS, MIN_BINS } from '../../src/webview/histogram';
import type { HistogramReply } from '../../src/protocol.gen';
import { dataMapCloud, explorerCloud, selectionName } from '../../src/webview/sampleData';
import { colorIndex, extentOf, packRgb, quantile, ramp } from '../../src/webview/scatter';

const histogramReply: HistogramReply = {
  split: 'val',
  source: 'scan',
  step: 40,
  edges: [0, 1, 2, 3, 4],
  counts: [5, 0, 2, 1],
  total: 9,
  below: 0,
  above: 0,
  missing: 1,
  min: 0.1,
  max: 3.9,
  mean: 1.2,
};

test('data map and explorer replies become typed point clouds; null becomes NaN', () => {
  const map = dataMapCloud({ split: 'train', source: 'training', step: 3, total: 10, index: [4, 7], confidence: [0.9, null], variability: [0.1, 0.2], correct: [1, null], loss: [0.1, 2] });
  assert.ok(map.points.x instanceof Float32Array);
  assert.deepEqual([...map.points.index], [4, 7]);
  assert.ok(Math.abs(map.points.x[1] - 0.2) < 1e-6, 'x is variability');
  assert.ok(Number.isNaN(map.points.y[1]), 'a null confidence is NaN');
  assert.ok(Number.isNaN(map.points.value[1]));
  assert.equal(map.total, 10);
  const explorer = explorerCloud({ split: 'val', source: 'scan', step: 1, total: 2, method: 'pca', index: [0, 1], x: [1, 2], y: [3, 4], loss: [0.5, 1.5] });
  assert.equal(explorer.method, 'pca');
  assert.deepEqual([...explorer.points.value], [0.5, 1.5]);
});

test('selection names are what the session accepts', () => {
  assert.equal(selectionName('train', 'loss', 0.123456, 2.5), 'train-loss-0.123-2.5');
  assert.equal(selectionName('train', 'loss', 1e-7, 3), 'train-loss-1e-7-3');
  assert.equal(selectionName('-x y', 'z'), 'x_y-z');
  assert.equal(selectionName(''), 'selection');
  for (const name of [selectionName('a'.repeat(100)), selectionName('val', 'loss', -1.5, 2)]) {
    assert.match(name, /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
  }
});

test('the histogram asks about one bin per four pixels, within bounds', () => {
  assert.equal(binsForWidth(400), 100);
  assert.equal(binsForWidth(0), MIN_BINS);
  assert.equal(binsForWidth(1e6), MAX_BINS);
});

test('a dragged region snaps out to whole bins and counts their samples', () => {
  const hist = histogramReply;
  assert.equal(binAt(4, 0), 0);
  assert.equal(binAt(4, 1), 3, 'the right edge belongs to the last bin');
  assert.equal(binAt(4, 0.5), 2);
  assert.deepEqual(dragRange(hist, 0.6, 0.3), { lo: 1, hi: 3, count: 2 }, 'dragged leftwards');
  assert.deepEqual(dragRange(hist, 0, 1), { lo: 0, hi: 4, count: 8 });
  assert.deepEqual(dragRange(hist, 0.1, 0.1), { lo: 0, hi: 1, count: 5 });
});

test('scatter extents pad the finite points; colours come from a lookup table', () => {
  const extent = extentOf(new Float32Array([0, 1, NaN]), new Float32Array([10, 20, 5]));
  assert.ok(extent.x0 < 0 && extent.x1 > 1 && extent.y0 < 10 && extent.y1 > 20);
  assert.deepEqual(extentOf([NaN], [NaN]), { x0: 0, x1: 1, y0: 0, y1: 1 });
  assert.equal(packRgb([1, 2, 3]), 0xff030201);
  const table = ramp([0, 0, 0], [255, 255, 255], 3);
  assert.deepEqual([...table], [0xff000000, 0xff808080, 0xffffffff]);
  assert.equal(colorIndex(-5, { lo: 0, hi: 1 }, 3), 0);
  assert.equal(colorIndex(0.5, { lo: 0, hi: 1 }, 3), 1);
  assert.equal(colorIndex(9, { lo: 0, hi: 1 }, 3), 2);
  assert.equal(colorIndex(7, { lo: 2, hi: 2 }, 3), 0, 'an empty span does not divide by zero');
  assert.equal(quantile(new Float32Array([5, NaN, 1, 3, 2, 4]), 0.5), 3);
  assert.ok(Number.isNaN(quantile(new Float32Array([NaN]), 0.5)));
});
