import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Outcome } from '../../src/common/messages';
import type { Finding, HealthResult } from '../../src/protocol.gen';
import { AckLines } from '../../src/webview/panels/controls';
import { CheckQueue, detailsText, sortFindings, verdict, type Check } from '../../src/webview/panels/health';
import { groupCount, parseHparamForm } from '../../src/webview/panels/hparams';

const empty = { lr: '', weight_decay: '', momentum: '', beta1: '', beta2: '', group: '' };

test('the hyperparameter form becomes one set command, or says what is wrong', () => {
  assert.deepEqual(parseHparamForm({ ...empty, lr: '1e-4', group: '1' }), { command: { type: 'set', lr: 0.0001, group: 1 } });
  assert.deepEqual(parseHparamForm({ ...empty, weight_decay: '0', beta1: '0.8', beta2: '0.99' }), {
    command: { type: 'set', weight_decay: 0, betas: [0.8, 0.99] },
  });
  assert.deepEqual(parseHparamForm(empty), { error: 'nothing to set: fill lr, weight decay, momentum or betas' });
  assert.deepEqual(parseHparamForm({ ...empty, lr: '0' }), { error: 'lr "0" is not a number > 0' });
  assert.deepEqual(parseHparamForm({ ...empty, lr: 'abc' }), { error: 'lr "abc" is not a number > 0' });
  assert.deepEqual(parseHparamForm({ ...empty, momentum: '1' }), { error: 'momentum "1" is not in [0, 1)' });
  assert.deepEqual(parseHparamForm({ ...empty, beta1: '0.9' }), { error: 'betas need both beta1 and beta2' });
});

test('param groups are counted from the learning rates the run reports', () => {
  assert.equal(groupCount({}), 1);
  assert.equal(groupCount({ lr: 0.1, 'lr/group1': 0.2, 'lr/group2': 0.3, loss: 1 }), 3);
});

const finding = (severity: Finding['severity'], summary: string): Finding => ({ check: 'gradients', severity, summary, details: {} });

test('findings are listed worst first, and a result with only info is ok', () => {
  const findings = [finding('info', 'a'), finding('error', 'b'), finding('warning', 'c'), finding('info', 'd')];
  assert.deepEqual(sortFindings(findings).map((f) => f.summary), ['b', 'c', 'a', 'd']);
  const result = (f: Finding[]): HealthResult =>
    ({ type: 'health_result', v: 1, session: 's', run: 'r', seq: 1, time: 0, check: 'gradients', step: 1, findings: f, duration: 0 });
  assert.equal(verdict(result(findings)), 'error');
  assert.equal(verdict(result([finding('info', 'x')])), 'ok');
  assert.match(detailsText({ big: 'x'.repeat(30_000) }), /… \(\d+ more characters\)$/);
});

test('health checks go out one at a time, each once, in click order', async () => {
  const sent: Check[] = [];
  const answers: ((o: Outcome) => void)[] = [];
  let changes = 0;
  const queue = new CheckQueue(
    (check) => {
      sent.push(check);
      return new Promise((resolve) => answers.push(resolve));
    },
    () => changes++,
  );
  queue.add('gradients');
  queue.add('determinism');
  queue.add('determinism');
  assert.deepEqual(sent, ['gradients']);
  assert.deepEqual(queue.waiting, ['determinism']);
  answers[0]({ ok: false, code: 'unsupported', message: 'no batch yet' });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(sent, ['gradients', 'determinism']);
  assert.equal(queue.problem, 'gradients failed: no batch yet (unsupported)');
  answers[1]({ ok: true, data: {} });
  await new Promise((r) => setImmediate(r));
  assert.equal(queue.running, null);
  assert.equal(queue.problem, '');
  assert.ok(changes >= 3);
});

test('an acknowledgement line belongs to the run it was for', async () => {
  const output = { value: '', className: '' } as HTMLOutputElement;
  const acks = new AckLines(output);
  acks.show('a');
  let answer: (o: Outcome) => void = () => undefined;
  const done = acks.track('a', 'pause', new Promise((resolve) => (answer = resolve)));
  assert.equal(output.value, 'pause…');
  acks.show('b');
  assert.equal(output.value, '');
  answer({ ok: true, data: { state: 'paused', step: 7 } });
  await done;
  assert.equal(output.value, '', 'the answer for run a does not show on run b');
  acks.show('a');
  assert.equal(output.value, 'pause: paused at step 7');
  assert.equal(output.className, 'ack ok');
});
