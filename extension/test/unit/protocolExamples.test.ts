/** The golden examples shared with the Python suite are read by the dashboard's parser and reducer. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import type { Command, Replies } from '../../src/protocol.gen';
import { isCancelled } from '../../src/common/replies';
import { bestLoss, describeCancel, describeFork, mergeCaption, reportRows } from '../../src/webview/forkText';
import { compareCaption } from '../../src/webview/panels/comparePanel';
import { histogramCaption } from '../../src/webview/panels/lossHistogram';
import { historyPoints } from '../../src/webview/panels/metrics';
import { describeScanReply } from '../../src/webview/panels/scanBar';
import { dataMapCloud, explorerCloud } from '../../src/webview/sampleData';
import { parseServerMessage, ProtocolError } from '../../src/common/parse';
import { applyServerMessage, newSource } from '../../src/common/state';
import { refusedAsExisting } from '../../src/webview/overwrite';
import { describeFailure } from '../../src/webview/panels/hparams';
import { applyHostMessage } from '../../src/webview/state';

// Compiled to extension/out/test/unit/: the repository root is four levels up.
const examples = join(__dirname, '..', '..', '..', '..', 'tests', 'protocol_examples');
const files = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.json')).sort().map((n) => join(dir, n)) : [];

const serverExamples = files(join(examples, 'valid', 'server'));

test('every valid server example parses and folds into the state', { skip: serverExamples.length === 0 && 'no examples yet' }, () => {
  const seen = new Set<string>();
  for (const path of serverExamples) {
    const message = parseServerMessage(readFileSync(path, 'utf8'));
    seen.add(message.type);
    const source = newSource('k', 'k');
    assert.doesNotThrow(() => applyServerMessage(source, message), path);
    assert.doesNotThrow(() => applyHostMessage({ sources: {} }, { type: 'server', source: 'k', message }), path);
  }
  for (const type of ['hello', 'snapshot', 'batch', 'metrics', 'steps', 'status', 'reply', 'error', 'coalesced']) {
    assert.ok(seen.has(type), `an example of ${type}`);
  }
});

test('the snapshot example builds its runs, series and logs', { skip: !existsSync(join(examples, 'valid', 'server', 'snapshot.json')) && 'no example' }, () => {
  const source = newSource('k', 'k');
  applyServerMessage(source, parseServerMessage(readFileSync(join(examples, 'valid', 'server', 'snapshot.json'), 'utf8')));
  const runs = Object.values(source.runs);
  assert.ok(runs.length >= 1);
  assert.ok(runs.some((r) => Object.keys(r.series).length > 0));
});

test('every valid command example is a command type the dashboard knows', { skip: files(join(examples, 'valid', 'command')).length === 0 && 'no examples yet' }, () => {
  const known: Record<Command['type'], true> = {
    subscribe: true, unsubscribe: true, history: true, status: true, ping: true, pause: true, resume: true, stop: true, test: true,
    health: true, set: true, export: true, import: true, checkpoints: true, restore: true, snapshot: true, scan: true,
    cancel: true, histogram: true, quantiles: true, select: true, selections: true, selection_rows: true,
    export_selection: true, data_map: true, explorer: true, fork: true, forks: true, compare: true, merge: true,
    discard_merge: true, lineage: true, sample_preview: true,
  };
  for (const path of files(join(examples, 'valid', 'command'))) {
    const command = JSON.parse(readFileSync(path, 'utf8')) as { type: string; id: unknown };
    assert.ok(Object.hasOwn(known, command.type), `${path}: ${command.type}`);
    assert.equal(typeof command.id, 'string', path);
  }
});

test('frames that are not server messages fail with a clear error', () => {
  assert.throws(() => parseServerMessage('NaN'), (e) => e instanceof ProtocolError && /not JSON/.test(e.message));
  assert.throws(() => parseServerMessage('[1]'), /frame is an array; expected a JSON object/);
  assert.throws(() => parseServerMessage('{"type":"nope"}'), /type "nope"; expected one of run_started/);
  assert.throws(() => parseServerMessage('{"type":"batch"}'), /no events list/);
});

test('the golden refusal of an export onto an existing file is recognised, and no other error', () => {
  const refusal = parseServerMessage(readFileSync(join(examples, 'valid', 'server', 'error-file_exists.json'), 'utf8'));
  assert.equal(refusal.type, 'error');
  if (refusal.type !== 'error') return;
  assert.ok(refusedAsExisting({ ok: false, code: refusal.error.code, message: refusal.error.message }));
  const other = parseServerMessage(readFileSync(join(examples, 'valid', 'server', 'error.json'), 'utf8'));
  if (other.type !== 'error') return;
  assert.ok(!refusedAsExisting({ ok: false, code: other.error.code, message: other.error.message }));
  assert.ok(!refusedAsExisting({ ok: true, data: {} }));
});

test('an hparam_error says what failed and what was put back', () => {
  const failed = parseServerMessage(readFileSync(join(examples, 'valid', 'server', 'hparam_error.json'), 'utf8'));
  if (failed.type !== 'hparam_error') throw new Error('expected hparam_error');
  const source = newSource('k', 'k');
  applyServerMessage(source, failed);
  assert.equal(source.runs[failed.run]?.hparamError?.step, 401);
  const text = describeFailure(failed);
  assert.match(text, /^step 401: the optimizer failed under the edit \(RuntimeError: value cannot be converted/);
  assert.match(text, /lr of group 0 back to 0\.001, lr of group 1 back to /);
  assert.match(text, /and paused$/);
});

// ------------------------------------------------------------------ replies

const replyExamples = files(join(examples, 'valid', 'reply'));
const commandOf = (path: string): string => basename(path, '.json').split('-')[0];
const replyOfFile = <K extends keyof Replies>(kind: K, name = kind as string): Replies[K] =>
  JSON.parse(readFileSync(join(examples, 'valid', 'reply', `${name}.json`), 'utf8')) as Replies[K];

test('every command type has a reply type and a golden reply example, and no example names another', () => {
  // A compile error until a new command's reply type is listed here (Replies is generated).
  const replies: Record<keyof Replies, true> = {
    subscribe: true, unsubscribe: true, history: true, status: true, ping: true, pause: true, resume: true, stop: true, test: true,
    health: true, set: true, export: true, import: true, checkpoints: true, restore: true, snapshot: true, scan: true,
    cancel: true, histogram: true, quantiles: true, select: true, selections: true, selection_rows: true,
    export_selection: true, data_map: true, explorer: true, fork: true, forks: true, compare: true, merge: true,
    discard_merge: true, lineage: true, sample_preview: true,
  };
  const seen = new Set(replyExamples.map(commandOf));
  assert.deepEqual([...seen].sort(), Object.keys(replies).sort());
});

test('the golden replies read through the typed views', () => {
  const compare = replyOfFile('compare');
  assert.ok(!isCancelled(compare));
  if (isCancelled(compare)) return;
  assert.equal(bestLoss(compare).length, compare.targets.length);
  assert.match(compareCaption(compare), /^\d+ models at step \d+/);
  const merge = replyOfFile('merge');
  if (isCancelled(merge)) throw new Error('expected a finished merge');
  assert.equal(reportRows(merge).length, merge.targets.length);
  assert.match(mergeCaption(merge), new RegExp(`^${merge.name}: ${merge.method} of`));
  const refused = replyOfFile('merge', 'merge-not-applied');
  if (isCancelled(refused)) throw new Error('expected a finished merge');
  assert.equal(refused.applied, false);
  assert.ok(isCancelled(replyOfFile('merge', 'merge-cancelled')));
  assert.match(describeFork({ ok: true, data: replyOfFile('fork') }), /^fork \S+: done, \d+ steps/);
  assert.equal(describeCancel({ ok: true, data: replyOfFile('cancel') }), 'cancel: stopping fork long');
  assert.match(describeScanReply('train', { ok: true, data: replyOfFile('scan') }), /^scan train: \d+ samples at step \d+/);
  assert.equal(describeScanReply('val', { ok: true, data: replyOfFile('scan', 'scan-cancelled') }), 'scan val: cancelled');
  const map = dataMapCloud(replyOfFile('data_map'));
  assert.equal(map.points.x.length, replyOfFile('data_map').index.length);
  assert.ok(Number.isNaN(map.points.y[1]), 'a null confidence is NaN');
  assert.equal(explorerCloud(replyOfFile('explorer')).method, 'pca');
  assert.match(histogramCaption(replyOfFile('histogram')), /without a loss/);
  assert.equal(historyPoints(replyOfFile('history')).values[1], null);
  const lineage = replyOfFile('lineage');
  assert.ok(lineage.nodes.some((n) => n.run === lineage.active), 'the active node is one of the nodes');
});
