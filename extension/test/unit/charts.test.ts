import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartGroups, chartName } from '../../src/common/series';
import type { HparamChange } from '../../src/protocol.gen';
import { align } from '../../src/webview/align';
import { describeChange, hparamMarkers } from '../../src/webview/markers';

test('splits of a metric share one chart, train first; a split prefix on the name is dropped', () => {
  assert.equal(chartName('loss'), 'loss');
  assert.equal(chartName('val/loss'), 'loss');
  assert.equal(chartName('val/val_loss'), 'loss');
  assert.equal(chartName('test/acc'), 'acc');
  assert.equal(chartName('lr/group1'), 'lr/group1');
  assert.deepEqual([...chartGroups(['val/loss', 'test/loss', 'loss', 'acc', 'val/val_acc'])], [
    ['acc', ['acc', 'val/val_acc']],
    ['loss', ['loss', 'val/loss', 'test/loss']],
  ]);
  assert.deepEqual([...chartGroups(['test/acc', 'test/test_acc'])], [
    ['acc', ['test/acc']],
    ['test/test_acc', ['test/test_acc']],
  ]);
});

test('aligning series joins their steps; a missing point is undefined, a gap stays null', () => {
  const aligned = align([
    { steps: [1, 2, 3, 4], values: [5, null, 7, 8] },
    { steps: [2, 5], values: [1, 2] },
  ]);
  assert.deepEqual(aligned, [
    [1, 2, 3, 4, 5],
    [5, null, 7, 8, undefined],
    [undefined, 1, undefined, undefined, 2],
  ]);
  assert.deepEqual(align([{ steps: [1], values: [2] }]), [[1], [2]]);
});

const change = (step: number, name: HparamChange['name'], old: HparamChange['old'], next: HparamChange['new'], group = 0): HparamChange =>
  ({ type: 'hparam_change', v: 1, session: 's', run: 'r', seq: step, time: 0, step, optimizer: 0, group, name, old, new: next });

test('hyperparameter changes become one marker per step listing each change', () => {
  assert.equal(describeChange(change(3, 'lr', 0.002, 0.0001)), 'lr: 0.002 -> 1.00e-4 (group 0)');
  assert.equal(describeChange(change(3, 'betas', [0.9, 0.999], [0.8, 0.99])), 'betas: (0.9, 0.999) -> (0.8, 0.99) (group 0)');
  assert.equal(describeChange(change(3, 'lr', null, 0.5)), 'lr: ? -> 0.5 (group 0)');
  const markers = hparamMarkers([change(3, 'lr', 0.1, 0.2), change(3, 'lr', 0.1, 0.2, 1), change(9, 'weight_decay', 0, 0.01)]);
  assert.deepEqual(markers.map((m) => m.step), [3, 9]);
  assert.equal(markers[0].label, 'step 3\nlr: 0.1 -> 0.2 (group 0)\nlr: 0.1 -> 0.2 (group 1)');
});
