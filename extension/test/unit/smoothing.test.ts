import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ema, movingAverage, smooth } from '../../src/webview/smoothing';

test('EMA is debiased: it starts at the first value and tracks a constant', () => {
  assert.deepEqual(ema([4, 4, 4], 0.9), [4, 4, 4]);
  const out = ema([0, 10], 0.5);
  assert.equal(out[0], 0);
  assert.ok(Math.abs((out[1] as number) - 10 * 0.5 / 0.75) < 1e-12);
});

test('EMA weight 0 returns the values; gaps stay gaps', () => {
  assert.deepEqual(ema([1, null, 3], 0), [1, null, 3]);
  assert.throws(() => ema([1], 1), /\[0, 1\), got 1/);
});

test('moving average uses a trailing window of finite values', () => {
  assert.deepEqual(movingAverage([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5]);
  assert.deepEqual(movingAverage([2, null, 4], 2), [2, null, 3]);
  assert.throws(() => movingAverage([1], 0), /window must be a whole number >= 1, got 0/);
});

test('smooth dispatches on the kind', () => {
  assert.deepEqual(smooth([1, 3], { kind: 'none' }), [1, 3]);
  assert.deepEqual(smooth([1, 3], { kind: 'mean', window: 2 }), [1, 2]);
  assert.deepEqual(smooth([2, 2], { kind: 'ema', weight: 0.6 }), [2, 2]);
});
