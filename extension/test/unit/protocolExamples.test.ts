/** The golden examples shared with the Python suite are read by the dashboard's parser and reducer. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Command } from '../../src/protocol.gen';
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
  for (const type of ['hello', 'snapshot', 'batch', 'metrics', 'status', 'reply', 'error', 'coalesced']) {
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
