import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyServerMessage, newRun, newSource, type DashboardState } from '../../src/common/state';
import type { CompareReply, CompareTarget, ForkProgress, ForkReply, LineageEdge, LineageNode, LineageView, MergeReply, RunInfo } from '../../src/protocol.gen';
import { forkCommand, mergeCommand, nameError, type ForkForm, type MergeForm } from '../../src/webview/forkForms';
import {
  bestLoss,
  canDiscard,
  describeCancel,
  describeDiscard,
  describeFork,
  describeForkProgress,
  mergeableForks,
  mergeCaption,
  reportRows,
} from '../../src/webview/forkText';
import { layoutLineage, type Box } from '../../src/webview/lineageLayout';
import { compareCaption } from '../../src/webview/panels/comparePanel';
import { latestProgress } from '../../src/webview/panels/forks';
import { nodeDetail, nodeStatus } from '../../src/webview/panels/lineageGraph';
import { signed } from '../../src/webview/panels/mergePanel';
import { childLabel, listRuns, rootRun } from '../../src/webview/panels/runPicker';
import { fitView, MAX_SCALE, panBy, scaleOf, zoomAt } from '../../src/webview/viewBox';

// ------------------------------------------------------------------ lineage fixtures

function node(run: string, kind: LineageNode['kind'], parent: string | null, step: number | null, extra: Partial<LineageNode> = {}): LineageNode {
  return {
    run, name: run, kind, status: kind === 'fork' ? 'done' : 'active', parent, parent_step: step, metrics_run: kind === 'fork' ? run : 'main',
    from_step: step ?? 0, method: kind === 'merge' ? 'soup' : null, selection: null, budget: null, hparams: {}, steps: null,
    slice_loss: null, parent_slice_loss: null, message: null, ...extra,
  };
}
const fork = (source: string, target: string, step: number): LineageEdge => ({ source, target, kind: 'fork', step, method: null });
const merge = (source: string, target: string, step: number): LineageEdge => ({ source, target, kind: 'merge', step, method: 'soup' });

function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

// ------------------------------------------------------------------ layout

test('the main run is at the left, a fork to its right below it, a merge right of both on the top row', () => {
  const nodes = [node('main', 'main', null, null), node('hard', 'fork', 'main', 400), node('merge-1', 'merge', 'main', 400)];
  const edges = [fork('main', 'hard', 400), merge('main', 'merge-1', 400), merge('hard', 'merge-1', 400)];
  const layout = layoutLineage(nodes, edges);
  const at = Object.fromEntries(layout.nodes.map((p) => [p.node.run, p]));
  assert.deepEqual([at.main.col, at.main.row], [0, 0]);
  assert.deepEqual([at.hard.col, at.hard.row], [1, 1]);
  assert.deepEqual([at['merge-1'].col, at['merge-1'].row], [2, 0]);
  assert.ok(at.main.x < at.hard.x && at.hard.x < at['merge-1'].x, 'left to right');
  assert.equal(at.main.y, at['merge-1'].y, 'the trunk stays on one row');
  assert.ok(at.hard.y > at.main.y);
  assert.equal(layout.edges.length, 3);
  // Each edge runs from its source's right side to its target's left side.
  for (const { edge, path } of layout.edges) {
    const a = at[edge.source];
    const b = at[edge.target];
    assert.ok(path.startsWith(`M${a.x + a.width} ${a.y + a.height / 2}C`), path);
    assert.ok(path.endsWith(` ${b.x} ${b.y + b.height / 2}`), path);
  }
  assert.deepEqual(layout.bounds, { x: 0, y: 0, width: at['merge-1'].x + at['merge-1'].width, height: at.hard.y + at.hard.height });
});

test('a handful of forks, merges, a discarded merge and forks of a merge never overlap', () => {
  const nodes = [
    node('main', 'main', null, null, { status: 'superseded' }),
    node('a', 'fork', 'main', 100),
    node('b', 'fork', 'main', 100),
    node('c', 'fork', 'main', 250, { status: 'cancelled' }),
    node('m1', 'merge', 'main', 250, { status: 'discarded' }),
    node('m2', 'merge', 'main', 250, { status: 'superseded' }),
    node('d', 'fork', 'm2', 400),
    node('e', 'fork', 'm2', 400, { status: 'running' }),
    node('m3', 'merge', 'm2', 500),
  ];
  const edges = [
    fork('main', 'a', 100), fork('main', 'b', 100), fork('main', 'c', 250),
    merge('main', 'm1', 250), merge('a', 'm1', 250),
    merge('main', 'm2', 250), merge('a', 'm2', 250), merge('b', 'm2', 250),
    fork('m2', 'd', 400), fork('m2', 'e', 400),
    merge('m2', 'm3', 500), merge('d', 'm3', 500),
  ];
  const layout = layoutLineage(nodes, edges);
  assert.equal(layout.nodes.length, nodes.length);
  for (let i = 0; i < layout.nodes.length; i++) {
    for (let j = i + 1; j < layout.nodes.length; j++) {
      assert.ok(!overlaps(layout.nodes[i], layout.nodes[j]), `${layout.nodes[i].node.run} and ${layout.nodes[j].node.run} overlap`);
    }
  }
  const at = Object.fromEntries(layout.nodes.map((p) => [p.node.run, p]));
  for (const { edge } of layout.edges) assert.ok(at[edge.source].col < at[edge.target].col, `${edge.source} -> ${edge.target} points right`);
  assert.equal(at.m2.col, 2, 'a merge sits right of every model it merged');
  assert.equal(at.m3.col, 4);
  assert.equal(at.m1.row === 0 || at.m2.row === 0, true, 'one of the merges takes the trunk row');
  assert.notEqual(at.m1.row, at.m2.row);
  assert.equal(layout.edges.filter((e) => e.edge.kind === 'merge').length, 7, 'every merge edge is drawn');
});

test('edges to unknown nodes are left out; an empty lineage has empty bounds', () => {
  const layout = layoutLineage([node('main', 'main', null, null)], [fork('main', 'ghost', 1)]);
  assert.equal(layout.edges.length, 0);
  assert.deepEqual(layoutLineage([], []).bounds, { x: 0, y: 0, width: 0, height: 0 });
});

// ------------------------------------------------------------------ view box

test('fit shows the whole drawing, centred, with the viewport aspect and a capped scale', () => {
  const bounds = { x: 0, y: 0, width: 1000, height: 200 };
  const viewport = { width: 500, height: 250 };
  const view = fitView(bounds, viewport, 10);
  assert.ok(Math.abs(view.width / view.height - 2) < 1e-9, 'same aspect as the viewport');
  assert.ok(view.x <= -10 && view.x + view.width >= 1010 && view.y <= -10 && view.y + view.height >= 210, 'contains the bounds and margin');
  assert.ok(Math.abs(view.x + view.width / 2 - 500) < 1e-9 && Math.abs(view.y + view.height / 2 - 100) < 1e-9, 'centred');
  const tiny = fitView({ x: 0, y: 0, width: 10, height: 10 }, viewport);
  assert.equal(scaleOf(tiny, viewport), MAX_SCALE, 'a small graph is not blown up');
});

test('zoom keeps the point under the cursor in place; a drag moves the drawing with the pointer', () => {
  const viewport = { width: 400, height: 200 };
  const view = { x: 0, y: 0, width: 400, height: 200 };
  const zoomed = zoomAt(view, viewport, 1.2, { x: 0.25, y: 0.5 });
  assert.ok(Math.abs(scaleOf(zoomed, viewport) - 1.2) < 1e-9);
  const under = (v: Box): [number, number] => [v.x + v.width * 0.25, v.y + v.height * 0.5];
  assert.deepEqual(under(zoomed).map((n) => Number(n.toFixed(9))), under(view));
  const panned = panBy(zoomed, viewport, 24, -12);
  assert.ok(Math.abs(panned.x - (zoomed.x - 20)) < 1e-9 && Math.abs(panned.y - (zoomed.y + 10)) < 1e-9, 'pixels / scale');
  assert.equal(panned.width, zoomed.width);
});

// ------------------------------------------------------------------ replies (the generated reply types)

const targets: CompareTarget[] = [
  { name: 'hard', kind: 'slice', split: 'train', samples: 205 },
  { name: 'rest', kind: 'rest', split: 'train', samples: 1843 },
  { name: 'val', kind: 'val', split: 'val', samples: 512 },
];
const compareReply: CompareReply = {
  cancelled: false,
  step: 836,
  targets,
  rows: [
    { model: 'mlp', run: 'mlp', kind: 'main', loss: [0.951, 0.3606, 0.4455], accuracy: [0.302, 0.831, 0.752], fork: null, steps: null },
    { model: 'hard', run: 'hard', kind: 'fork', loss: [0.736, 0.8376, null], accuracy: [0.79, 0.62, null], fork: null, steps: null },
  ],
  notes: [],
  duration: 0.094,
};
const mergeReply: MergeReply = {
  name: 'merge-1', run: 'merge-1', method: 'soup', forks: ['hard'], kept: null, choice: {}, grid: [], optimizer: 'keep', targets,
  before: { loss: [0.951, 0.3606, 0.4455], accuracy: [0.302, 0.831, 0.752] },
  after: { loss: [0.789, 0.529, 0.4455], accuracy: [0.737, 0.755, 0.762] },
  distill: null, applied: true, gate: {}, duration: 0.11, state: 'paused', step: 836, epoch: 26,
};

test('a compare reply draws as a table; the lowest loss of each target is marked', () => {
  assert.deepEqual(bestLoss(compareReply), [1, 0, 0]);
  assert.equal(compareCaption(compareReply), '2 models at step 836 · 0.1 s');
});

test('a merge reply becomes a before/after report per target', () => {
  const report = mergeReply;
  const rows = reportRows(report);
  assert.deepEqual(rows.map((r) => r.target.name), ['hard', 'rest', 'val']);
  assert.ok(Math.abs((rows[0].change as number) - (0.789 - 0.951)) < 1e-12, 'after - before');
  assert.equal(rows[2].change, 0);
  assert.equal(rows[0].accAfter, 0.737);
  assert.equal(mergeCaption(report), 'merge-1: soup of hard at step 836 · optimizer keep · 0.1 s');
  const greedy: MergeReply = { ...mergeReply, method: 'greedy', kept: ['mlp'], distill: null };
  assert.match(mergeCaption(greedy), /kept mlp/);
  const refused: MergeReply = { ...mergeReply, applied: false, reason: 'worse', choice: { weights: [0.25, 0.75] } };
  assert.equal(refused.applied, false);
  assert.match(mergeCaption(refused), /chosen on validation: weights 0.25\/0.75 · not applied/);
  const distilled: MergeReply = { ...mergeReply, method: 'distill', distill: { steps: 100, distill_loss: 0.25 } };
  assert.match(mergeCaption(distilled), /steps 100, distill_loss 0.25/);
  assert.equal(signed(-0.162), '−0.162');
  assert.equal(signed(0.04), '+0.04');
  assert.equal(signed(null), '–');
});

const lineageReply: LineageView = {
  active: 'merge-1',
  nodes: [
    node('mlp', 'main', null, null, { status: 'superseded' }),
    node('hard', 'fork', 'mlp', 836, { steps: 50, budget: { steps: 50 }, slice_loss: 0.736, parent_slice_loss: 0.951, selection: { name: 'tail', size: 205 } }),
    node('adapted', 'fork', 'mlp', 836, { hparams: { adapter_rank: 4 } }),
    node('cut', 'fork', 'mlp', 836, { status: 'cancelled' }),
    node('merge-1', 'merge', 'mlp', 836),
  ],
  edges: [fork('mlp', 'hard', 836), merge('mlp', 'merge-1', 836), merge('hard', 'merge-1', 836)],
};

test('only finished forks can be merged; a fresh merge can be discarded', () => {
  const lineage = lineageReply;
  assert.deepEqual(mergeableForks(lineage, 'soup').map((n) => n.name), ['hard', 'adapted']);
  assert.deepEqual(mergeableForks(lineage, 'adapter').map((n) => n.name), ['adapted']);
  assert.deepEqual(mergeableForks(null, 'soup'), []);
  assert.equal(canDiscard(lineage), true);
  assert.equal(canDiscard({ ...lineage, active: 'mlp' }), false);
  const [main, hard, , cut, merged] = lineage.nodes;
  assert.equal(nodeDetail(main), 'main run');
  assert.equal(nodeDetail(hard), 'fork @ 836 · 50 steps');
  assert.equal(nodeStatus(hard), 'done · slice 0.951 → 0.736');
  assert.equal(nodeDetail({ ...hard, status: 'running', steps: null }), 'fork @ 836 · 50 steps', 'a running fork shows its budget');
  assert.equal(nodeStatus(cut), 'cancelled');
  assert.equal(nodeDetail(merged), 'soup merge @ 836');
});

const progress = (state: ForkProgress['state'], step: number, total: number | null, seq = 1, extra: Partial<ForkProgress> = {}): ForkProgress => ({
  type: 'fork_progress', v: 1, session: 's', run: 'hard', seq, time: 0, fork: 'hard', state, step, total, loss: 0.82, elapsed: 1.5, message: null, ...extra,
});

test('fork progress, replies and discards read as one line each', () => {
  assert.equal(describeForkProgress(null), '');
  assert.equal(describeForkProgress(progress('running', 64, 200)), 'fork hard: 64 / 200 steps (32 %) · loss 0.82 · 1.5 s');
  assert.equal(describeForkProgress(progress('running', 64, null, 1, { loss: null })), 'fork hard: 64 steps · 1.5 s');
  assert.equal(describeForkProgress(progress('done', 200, 200)), 'fork hard done: 200 steps · loss 0.82 · 1.5 s');
  assert.equal(describeForkProgress(progress('cancelled', 12, 200)), 'fork hard cancelled after 12 steps');
  assert.equal(describeForkProgress(progress('failed', 3, null, 1, { message: 'RuntimeError: boom' })), 'fork hard failed after 3 steps: RuntimeError: boom');
  const done: ForkReply = {
    name: 'hard', run: 'hard', parent: 'mlp', parent_step: 836, selection: { name: 'tail', size: 205 }, budget: { steps: 50 }, hparams: {},
    status: 'done', steps: 50, duration: 0.13, slice_loss: 0.736, parent_slice_loss: 0.951, message: null, has_weights: true, created: 1,
    warnings: [], state: 'paused', step: 836, epoch: 26,
  };
  assert.equal(describeFork({ ok: true, data: done }), 'fork hard: done, 50 steps in 0.1 s · slice loss 0.951 → 0.736');
  assert.equal(describeFork({ ok: true, data: { ...done, status: 'failed', message: 'boom', slice_loss: null } }), 'fork hard: failed, 50 steps in 0.1 s: boom');
  assert.equal(describeFork({ ok: false, code: 'invalid_state', message: 'a fork needs a paused run' }), 'fork failed: a fork needs a paused run (invalid_state)');
  const discarded = { name: 'merge-1', run: 'merge-1', active: 'mlp', state: 'paused', step: 836, epoch: 26 } as const;
  assert.equal(describeDiscard({ ok: true, data: discarded }), 'discarded merge-1: back to mlp at step 836');
  assert.equal(describeDiscard({ ok: false, code: 'invalid_state', message: 'no merge to discard' }), 'discard failed: no merge to discard (invalid_state)');
  assert.equal(describeCancel({ ok: true, data: { cancelled: true, fork: 'long' } }), 'cancel: stopping fork long');
  assert.equal(describeCancel({ ok: true, data: { cancelled: true, merge: 'merge-2' } }), 'cancel: stopping merge merge-2');
  assert.equal(describeCancel({ ok: true, data: { cancelled: true, compare: true } }), 'cancel: stopping the comparison');
  assert.equal(describeCancel({ ok: true, data: { cancelled: false } }), 'cancel: nothing was running');
  const runs = [{ ...newRun(info('a', 'main')), fork: progress('done', 5, 5, 3) }, { ...newRun(info('b', 'main')), fork: progress('running', 2, 5, 9) }, newRun(info('c', 'main'))];
  assert.equal(latestProgress(runs)?.seq, 9);
  assert.equal(latestProgress([]), null);
});

// ------------------------------------------------------------------ dialogs

const forkForm: ForkForm = { selection: 'train-loss-1.2-3.4', name: '', amount: '200', unit: 'steps', lr: '', batchSize: '', optimizer: 'fresh', adapterRank: '' };

test('the fork dialog becomes one fork command, or says what is wrong', () => {
  assert.deepEqual(forkCommand(forkForm), { command: { type: 'fork', selection: 'train-loss-1.2-3.4', steps: 200, optimizer: 'fresh' } });
  assert.deepEqual(forkCommand({ ...forkForm, name: ' hard.v2 ', amount: '3', unit: 'epochs', lr: '1e-3', batchSize: '16', adapterRank: '8' }), {
    command: { type: 'fork', selection: 'train-loss-1.2-3.4', name: 'hard.v2', epochs: 3, lr: 0.001, batch_size: 16, adapter_rank: 8, optimizer: 'fresh' },
  });
  for (const amount of ['0', '-1', '1.5', 'abc', '']) {
    assert.deepEqual(forkCommand({ ...forkForm, amount }), { error: `budget in steps "${amount}" is not a whole number >= 1` });
  }
  assert.deepEqual(forkCommand({ ...forkForm, lr: '0' }), { error: 'learning rate "0" is not a number > 0' });
  assert.deepEqual(forkCommand({ ...forkForm, batchSize: '0.5' }), { error: 'batch size "0.5" is not a whole number >= 1' });
  assert.match((forkCommand({ ...forkForm, adapterRank: '4', optimizer: 'clone' }) as { error: string }).error, /fresh optimizer/);
  assert.match((forkCommand({ ...forkForm, name: '-hard' }) as { error: string }).error, /^fork name "-hard" is not a valid name/);
});

test('names follow the session: 1-64 letters, digits, . _ -, starting with a letter or digit', () => {
  for (const good of ['a', 'fork-1', 'Hard_slice.v2', '9', 'x'.repeat(64)]) assert.equal(nameError(good, 'name'), null, good);
  for (const bad of ['', '-a', '.a', '_a', 'a/b', 'a b', 'é', 'x'.repeat(65)]) assert.notEqual(nameError(bad, 'name'), null, bad);
});

const mergeForm: MergeForm = { method: 'soup', forks: ['hard'], name: '', weights: '', optimizer: 'keep', steps: '100', lr: '', temperature: '2' };

test('the merge dialog becomes one merge command, or says what is wrong', () => {
  assert.deepEqual(mergeCommand(mergeForm), { command: { type: 'merge', method: 'soup', forks: ['hard'], optimizer: 'keep' } });
  assert.deepEqual(mergeCommand({ ...mergeForm, forks: ['a', 'b'], weights: '2, 1, 1', name: 'soup-1', optimizer: 'reset' }), {
    command: { type: 'merge', method: 'soup', forks: ['a', 'b'], optimizer: 'reset', name: 'soup-1', weights: [2, 1, 1] },
  });
  assert.deepEqual(mergeCommand({ ...mergeForm, weights: '1' }), { error: '1 weights for 2 models; expected 2 (the parent first, then each fork)' });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'adapter', weights: '0.5' }), { command: { type: 'merge', method: 'adapter', forks: ['hard'], optimizer: 'keep', weights: [0.5] } });
  assert.deepEqual(mergeCommand({ ...mergeForm, weights: '1, -1' }), { error: 'weights "1, -1" must be numbers >= 0' });
  assert.deepEqual(mergeCommand({ ...mergeForm, weights: '0, 0' }), { error: 'soup weights are all 0; expected at least one above 0' });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'fisher', weights: '1, 1' }), { error: 'weights apply to soup and adapter merges, not fisher' });
  assert.deepEqual(mergeCommand({ ...mergeForm, forks: [] }), { error: 'choose at least one finished fork to merge' });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'distill', steps: '300', lr: '0.01', temperature: '4' }), {
    command: { type: 'merge', method: 'distill', forks: ['hard'], optimizer: 'keep', steps: 300, temperature: 4, lr: 0.01 },
  });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'distill', steps: '0' }), { error: 'distillation steps "0" is not a whole number >= 1' });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'distill', temperature: '0' }), { error: 'temperature "0" is not a number > 0' });
  assert.deepEqual(mergeCommand({ ...mergeForm, method: 'distill', temperature: ' ' }), {
    command: { type: 'merge', method: 'distill', forks: ['hard'], optimizer: 'keep', steps: 100 },
  });
  assert.match((mergeCommand({ ...mergeForm, name: 'a/b' }) as { error: string }).error, /^merge name "a\/b" is not a valid name/);
});

// ------------------------------------------------------------------ runs: state and picker

function info(run: string, name: string, parent: string | null = null, started = 0): RunInfo {
  return { run, project: 'forks', name, parent, state: 'running', step: 0, epoch: 0, started_at: started, latest: {}, alerts: [], config: {} };
}

test('fork progress and lineage events are kept on their runs', () => {
  const source = newSource('k', 'k');
  const envelope = { v: 1 as const, session: 's', time: 0 };
  applyServerMessage(source, { ...envelope, type: 'run_started', run: 'mlp', seq: 1, info: info('mlp', 'mlp') });
  applyServerMessage(source, { ...envelope, type: 'run_started', run: 'hard', seq: 2, info: info('hard', 'hard', 'mlp') });
  applyServerMessage(source, { ...progress('running', 10, 50, 3), session: 's' });
  applyServerMessage(source, { ...envelope, type: 'lineage', run: 'mlp', seq: 4, ...lineageReply });
  assert.equal(source.runs.hard.fork?.step, 10);
  assert.equal(source.runs.mlp.lineage?.active, 'merge-1');
  assert.equal(source.runs.mlp.fork, null);
});

test('the picker nests forks and merges under their run, labelled with what they are', () => {
  const source = newSource('k', 'k');
  source.status = 'open';
  source.runs.other = newRun(info('other', 'other', null, 5));
  source.runs.mlp = { ...newRun(info('mlp', 'mlp', null, 1)), lineage: { type: 'lineage', v: 1, session: 's', run: 'mlp', seq: 1, time: 0, ...lineageReply } };
  source.runs['merge-1'] = newRun({ ...info('merge-1', 'merge-1', 'mlp', 3), state: 'finished' });
  source.runs.hard = newRun({ ...info('hard', 'hard', 'mlp', 2), state: 'finished' });
  source.runs.orphan = newRun(info('orphan', 'orphan', 'gone', 4));
  const state: DashboardState = { sources: { k: source } };
  const entries = listRuns(state);
  assert.deepEqual(entries.map((e) => [e.ref.run, e.depth]), [['other', 0], ['orphan', 0], ['mlp', 0], ['hard', 1], ['merge-1', 1]]);
  assert.equal(entries[3].label, 'fork of mlp @ 836');
  assert.equal(entries[4].label, 'soup merge @ 836');
  assert.equal(entries[2].label, 'forks · k');
  const nodes = lineageReply.nodes;
  assert.equal(childLabel(undefined, nodes, 'mlp'), 'child of mlp');
  assert.equal(childLabel({ ...nodes[4], status: 'discarded' }, nodes, 'mlp'), 'soup merge (discarded) @ 836');
  assert.equal(childLabel(nodes[3], nodes, 'mlp'), 'fork of mlp @ 836 · cancelled');
  assert.equal(childLabel(node('late', 'fork', 'merge-1', 900), nodes, 'mlp'), 'fork of merge-1 @ 900', 'a fork of a merge names the merge');
  assert.deepEqual(rootRun(state, { source: 'k', run: 'hard' }), { source: 'k', run: 'mlp' });
  assert.deepEqual(rootRun(state, { source: 'k', run: 'orphan' }), { source: 'k', run: 'orphan' });
});
