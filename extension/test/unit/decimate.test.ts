import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decimate, lowerBound, upperBound } from '../../src/common/decimate';

test('decimation keeps first, last and each bucket min/max in step order', () => {
  const steps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const values = [0, 5, 1, 1, 1, 1, 1, 9, 1, 0];
  // Same example as the server's decimate() docstring: both sides must agree.
  assert.deepEqual(decimate({ steps, values }, 6), { steps: [0, 1, 2, 5, 7, 9], values: [0, 5, 1, 1, 9, 0] });
});

test('a short series comes back whole and a long one within budget', () => {
  const short = { steps: [1, 2, 3], values: [3, 2, 1] };
  assert.deepEqual(decimate(short, 10), short);
  const n = 100_000;
  const long = { steps: Array.from({ length: n }, (_, i) => i), values: Array.from({ length: n }, (_, i) => Math.sin(i)) };
  long.values[54_321] = 50; // a spike
  const out = decimate(long, 1000);
  assert.ok(out.steps.length <= 1000);
  assert.equal(out.steps[0], 0);
  assert.equal(out.steps.at(-1), n - 1);
  assert.ok(out.values.includes(50), 'the spike survives');
  assert.deepEqual([...out.steps].sort((a, b) => a - b), out.steps);
});

test('gaps stay gaps and a window of the series can be decimated', () => {
  const out = decimate({ steps: [0, 1, 2, 3, 4, 5], values: [1, null, null, null, null, 2] }, 4);
  assert.deepEqual(out, { steps: [0, 1, 5], values: [1, null, 2] });
  const window = decimate({ steps: [0, 1, 2, 3, 4, 5], values: [0, 1, 2, 3, 4, 5] }, 10, 2, 5);
  assert.deepEqual(window, { steps: [2, 3, 4], values: [2, 3, 4] });
});

test('a budget under two points is an error', () => {
  assert.throws(() => decimate({ steps: [1], values: [1] }, 1), /at least 2, got 1/);
});

test('bounds find the first step at or after / after a step', () => {
  const steps = [1, 3, 3, 5];
  assert.equal(lowerBound(steps, 3), 1);
  assert.equal(upperBound(steps, 3), 3);
  assert.equal(lowerBound(steps, 6), 4);
  assert.equal(upperBound(steps, 0), 0);
});
