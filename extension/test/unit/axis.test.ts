import assert from 'node:assert/strict';
import { test } from 'node:test';
import { epochAxis, STEP_AXIS } from '../../src/webview/axis';

test('steps map to fractional epochs and back', () => {
  const map = epochAxis([0, 100, 200], 250);
  assert.equal(map.toX(0), 0);
  assert.equal(map.toX(50), 0.5);
  assert.equal(map.toX(150), 1.5);
  assert.equal(map.toX(250), 2.5); // the running epoch is sized like the previous one
  assert.equal(map.toStep(1.5), 150);
});

test('without epoch boundaries the axis stays in steps', () => {
  assert.equal(epochAxis([], 10), STEP_AXIS);
});
