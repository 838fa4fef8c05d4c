import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ServerMessage } from '../../src/protocol.gen';
import { appendPoint, emptySeries, parseSeriesKey, seriesKey } from '../../src/common/series';
import { applyServerMessage, newSource, pill, type SourceView } from '../../src/common/state';
import { applyHostMessage } from '../../src/webview/state';
import { metricsEvent, runInfo } from '../support/fakeSession';

const msg = (value: Record<string, unknown>): ServerMessage => value as unknown as ServerMessage;

function snapshot(seq: number, runs: Record<string, unknown>[], logs: Record<string, unknown>[] = []): ServerMessage {
  return msg({ type: 'snapshot', v: 1, session: 's1', seq, time: 1, runs, logs });
}

function withRun(): SourceView {
  const source = newSource('k', 'p/r');
  source.status = 'open';
  applyServerMessage(source, snapshot(10, [{ ...runInfo(), series: { loss: { steps: [1, 2], values: [0.9, 0.8], decimated: false } }, health: [], hparam_changes: [], epoch_starts: [0] }]));
  return source;
}

test('a snapshot sets the runs, their series and the stream position', () => {
  const source = withRun();
  assert.equal(source.lastSeq, 10);
  assert.deepEqual(source.runs.r.series.loss.steps, [1, 2]);
  assert.deepEqual(source.runs.r.epochStarts, [0]);
});

test('a snapshot brings the run its latest lineage, never an older one than streamed', () => {
  const lineage = (seq: number, active: string) => ({ v: 1, session: 's1', run: 'r', seq, time: 1, type: 'lineage', active, nodes: [], edges: [] });
  const source = withRun();
  const run = { ...runInfo(), series: {}, health: [], hparam_changes: [], epoch_starts: [] };
  applyServerMessage(source, snapshot(20, [{ ...run, lineage: lineage(15, 'merge-1') }]));
  assert.equal(source.runs.r.lineage?.active, 'merge-1');
  applyServerMessage(source, msg(lineage(25, 'merge-2')));
  applyServerMessage(source, snapshot(22, [{ ...run, lineage: lineage(15, 'merge-1') }]));
  assert.equal(source.runs.r.lineage?.active, 'merge-2');
});

test('events apply once: a replayed seq is a duplicate', () => {
  const source = withRun();
  assert.equal(applyServerMessage(source, msg(metricsEvent(11, 3, 0.7))), true);
  assert.equal(applyServerMessage(source, msg(metricsEvent(11, 3, 0.7))), false);
  assert.equal(applyServerMessage(source, msg(metricsEvent(5, 9, 0.1))), false, 'older than the snapshot');
  assert.deepEqual(source.runs.r.series.loss.steps, [1, 2, 3]);
  assert.equal(source.runs.r.info.step, 3);
  assert.equal(source.runs.r.info.latest.loss, 0.7);
});

test('a steps event adds the points of each metric where the steps have them, once', () => {
  const source = withRun();
  const steps = msg({
    v: 1, session: 's1', run: 'r', seq: 11, time: 5, type: 'steps', split: 'train', steps: [3, 4, 5], epochs: [0, 0, 1],
    values: { loss: { steps: [3, 4, 5], values: [0.7, null, 0.5] }, grad_norm: { steps: [4], values: [2.5] } },
  });
  assert.equal(applyServerMessage(source, steps), true);
  assert.equal(applyServerMessage(source, steps), false, 'a replayed seq');
  const run = source.runs.r;
  assert.deepEqual(run.series.loss.steps, [1, 2, 3, 4, 5]);
  assert.deepEqual(run.series.loss.values, [0.9, 0.8, 0.7, null, 0.5]);
  assert.deepEqual(run.series.grad_norm.steps, [4], 'no point at the steps that lack it');
  assert.equal(run.info.step, 5);
  assert.equal(run.info.epoch, 1);
  assert.equal(run.info.latest.loss, 0.5);
  assert.equal(run.info.latest.grad_norm, 2.5);
});

test('a batch applies its new events in order and skips the known ones', () => {
  const source = withRun();
  applyServerMessage(source, msg({ type: 'batch', events: [metricsEvent(9, 0, 1), metricsEvent(11, 3, 0.7), metricsEvent(12, 4, 0.6)] }));
  assert.deepEqual(source.runs.r.series.loss.steps, [1, 2, 3, 4]);
  assert.equal(source.lastSeq, 12);
});

test('a coalesced notice moves the stream position over the skipped range', () => {
  const source = withRun();
  applyServerMessage(source, msg({ type: 'coalesced', from_seq: 11, to_seq: 40, dropped: 25 }));
  assert.equal(source.lastSeq, 40);
  assert.equal(source.dropped, 25);
  assert.equal(applyServerMessage(source, msg(metricsEvent(30, 5, 0.5))), false);
  assert.equal(applyServerMessage(source, msg(metricsEvent(41, 6, 0.5))), true);
});

test('a later snapshot replaces what it carries and keeps runs it does not mention', () => {
  const source = withRun();
  applyServerMessage(source, msg({ type: 'test_result', v: 1, session: 's1', run: 'r', seq: 11, time: 2, label: 'test_1', step: 2, loss: 0.5, metrics: {}, duration: 0.1 }));
  applyServerMessage(source, snapshot(20, [{ ...runInfo('other'), series: {}, health: [], hparam_changes: [], epoch_starts: [] }]));
  assert.ok(source.runs.r, 'the earlier run stays viewable');
  assert.equal(source.runs.r.tests.length, 1, 'snapshots carry no test results: keep them');
  applyServerMessage(source, snapshot(30, [{ ...runInfo(), step: 7, series: { loss: { steps: [5, 7], values: [1, 2], decimated: true } }, health: [], hparam_changes: [], epoch_starts: [0, 5] }]));
  assert.deepEqual(source.runs.r.series.loss.steps, [5, 7]);
  assert.equal(source.runs.r.series.loss.decimated, true);
  assert.equal(source.runs.r.info.step, 7);
  assert.equal(source.lastSeq, 30);
});

test('snapshot logs merge with older ones without duplicates', () => {
  const source = withRun();
  const record = (time: number): Record<string, unknown> => ({ time, level: 'INFO', logger: 'x', message: `m${time}` });
  applyServerMessage(source, msg({ type: 'log', v: 1, session: 's1', run: 'r', seq: 11, time: 1, record: record(1) }));
  applyServerMessage(source, msg({ type: 'log', v: 1, session: 's1', run: 'r', seq: 12, time: 2, record: record(2) }));
  applyServerMessage(source, snapshot(13, [], [record(2), record(3)]));
  assert.deepEqual(source.logs.map((e) => e.record.time), [1, 2, 3]);
});

test('status, epochs and runtime update the run; the pill tells paused from disconnected', () => {
  const source = withRun();
  const base = { v: 1, session: 's1', run: 'r', time: 1 };
  applyServerMessage(source, msg({ ...base, seq: 11, type: 'status', state: 'paused', step: 2, epoch: 0, reason: null }));
  applyServerMessage(source, msg({ ...base, seq: 12, type: 'epoch', epoch: 1, step: 100 }));
  assert.equal(pill(source, source.runs.r), 'paused');
  assert.deepEqual(source.runs.r.epochStarts, [0, 100]);
  assert.equal(source.runs.r.info.epoch, 1);
  source.status = 'connecting';
  assert.equal(pill(source, source.runs.r), 'disconnected');
  applyServerMessage(source, msg({ ...base, seq: 13, type: 'status', state: 'finished', step: 2, epoch: 1, reason: 'done' }));
  assert.equal(pill(source, source.runs.r), 'finished', 'a finished run is finished even offline');
});

test('telemetry of a run never announced creates it', () => {
  const source = withRun();
  applyServerMessage(source, msg(metricsEvent(11, 1, 0.5, 'fork')));
  assert.equal(source.runs.fork.info.name, 'fork');
});

test('a streamed series stays bounded and keeps its newest point', () => {
  const series = emptySeries();
  for (let step = 0; step < 1000; step++) appendPoint(series, step, Math.sin(step), 100);
  assert.ok(series.steps.length <= 200);
  assert.equal(series.steps.at(-1), 999);
  assert.equal(series.steps[0], 0);
  assert.equal(series.decimated, true);
  appendPoint(series, 999, 5, 100);
  assert.equal(series.values.at(-1), 5, 'a repeated step replaces its value');
});

test('series keys follow the server: train metrics keep their name', () => {
  assert.equal(seriesKey('train', 'loss'), 'loss');
  assert.equal(seriesKey('val', 'loss'), 'val/loss');
  assert.deepEqual(parseSeriesKey('val/loss'), { split: 'val', metric: 'loss' });
  assert.deepEqual(parseSeriesKey('loss'), { split: 'train', metric: 'loss' });
  assert.deepEqual(parseSeriesKey('grad/norm'), { split: 'train', metric: 'grad/norm' });
});

test('the page drops relayed events already in the state handed over on ready', () => {
  const host = withRun();
  applyServerMessage(host, msg(metricsEvent(11, 3, 0.7)));
  // The page asked for the state after event 11 was folded in, and event 11 is relayed too.
  let page = applyHostMessage({ sources: {} }, { type: 'state', state: structuredClone({ sources: { k: host } }) }).state;
  page = applyHostMessage(page, { type: 'server', source: 'k', message: msg(metricsEvent(11, 3, 0.7)) }).state;
  page = applyHostMessage(page, { type: 'server', source: 'k', message: msg(metricsEvent(12, 4, 0.6)) }).state;
  assert.deepEqual(page.sources.k.runs.r.series.loss.steps, [1, 2, 3, 4]);
});

test('a handed-over state keeps runs the page saw but the host forgot', () => {
  const page = { sources: { old: withRun() } };
  const next = applyHostMessage(page, { type: 'state', state: { sources: {} } }).state;
  assert.ok(next.sources.old.runs.r);
  assert.equal(next.sources.old.ended, true);
});

test('health results keep the latest per check; hparam changes stay in step order, once each', () => {
  const source = withRun();
  const finding = { check: 'gradients', severity: 'info', summary: 'fine', details: {} };
  const health = (seq: number, step: number) =>
    msg({ type: 'health_result', v: 1, session: 's1', run: 'r', seq, time: 1, check: 'gradients', step, findings: [finding], duration: 0.1 });
  const change = (seq: number, step: number) =>
    msg({ type: 'hparam_change', v: 1, session: 's1', run: 'r', seq, time: 1, step, optimizer: 0, group: 0, name: 'lr', old: 0.1, new: 0.01 });
  applyServerMessage(source, health(11, 5));
  applyServerMessage(source, msg({ type: 'batch', events: [change(12, 9), health(13, 8)] }));
  const run = source.runs.r;
  assert.equal(run.health.gradients?.step, 8);
  assert.deepEqual(run.hparams.map((c) => c.step), [9]);
  // A snapshot repeats what was streamed: nothing doubles; an older change sorts first.
  applyServerMessage(source, snapshot(20, [{ ...runInfo(), series: {}, epoch_starts: [0], health: [(health(13, 8) as unknown)], hparam_changes: [change(12, 9), change(3, 2)] }]));
  assert.deepEqual(run.hparams.map((c) => c.seq), [3, 12]);
  assert.equal(run.health.gradients?.seq, 13);
  applyServerMessage(source, msg({ type: 'scan_progress', v: 1, session: 's1', run: 'r', seq: 21, time: 1, split: 'val', state: 'running', done: 10, total: 100, elapsed: 0.5 }));
  assert.equal(run.scans.val?.done, 10);
});

test('scan progress is kept per split, the latest event of each, and survives a snapshot', () => {
  const source = withRun();
  const progress = (seq: number, split: string, state: string, done: number) =>
    msg({ type: 'scan_progress', v: 1, session: 's1', run: 'r', seq, time: 1, split, state, done, total: 100, elapsed: 0.1 * seq });
  applyServerMessage(source, msg({ type: 'batch', events: [progress(11, 'train', 'running', 0), progress(12, 'val', 'running', 40), progress(13, 'train', 'running', 60)] }));
  const run = source.runs.r;
  assert.equal(run.scans.train?.done, 60);
  assert.equal(run.scans.val?.done, 40);
  assert.equal(applyServerMessage(source, progress(12, 'val', 'done', 100)), false, 'a replayed seq changes nothing');
  applyServerMessage(source, progress(14, 'train', 'done', 100));
  assert.equal(run.scans.train?.state, 'done');
  applyServerMessage(source, snapshot(20, [{ ...runInfo(), series: {}, epoch_starts: [0], health: [], hparam_changes: [] }]));
  assert.equal(run.scans.train?.state, 'done', 'snapshots carry no scan progress: the last one stays');
  assert.equal(run.scans.test, undefined);
});
