/**
 * Live hyperparameters of the selected run: learning rate, weight decay, momentum and Adam's
 * betas, for every param group or one, sent as one `set` command (applied at the next batch
 * boundary). Empty fields stay as they are. Each change shows as a marker on the charts.
 */
import type { CommandBody, Outcome } from '../../common/messages';
import type { RunView } from '../../common/state';
import type { HparamChange, HparamError } from '../../protocol.gen';
import { fill, formatNumber, h } from '../dom';
import { describeChange } from '../markers';
import { AckLines } from './controls';

export interface HparamForm {
  lr: string;
  weight_decay: string;
  momentum: string;
  beta1: string;
  beta2: string;
  /** `''` for every group, else the group's index. */
  group: string;
}

type SetCommand = Extract<CommandBody, { type: 'set' }>;

/**
 * The `set` command of a filled form, or what is wrong with it.
 *
 * Example: `parseHparamForm({lr: '1e-4', weight_decay: '', momentum: '', beta1: '', beta2: '', group: '1'})`
 * gives `{command: {type: 'set', lr: 0.0001, group: 1}}`.
 */
export function parseHparamForm(form: HparamForm): { command: SetCommand } | { error: string } {
  const command: SetCommand = { type: 'set' };
  const number = (name: string, text: string, ok: (v: number) => boolean, expected: string): number | string | null => {
    if (!text.trim()) return null;
    const value = Number(text);
    return Number.isFinite(value) && ok(value) ? value : `${name} "${text}" is not ${expected}`;
  };
  const checks: [keyof SetCommand, number | string | null][] = [
    ['lr', number('lr', form.lr, (v) => v > 0, 'a number > 0')],
    ['weight_decay', number('weight decay', form.weight_decay, (v) => v >= 0, 'a number >= 0')],
    ['momentum', number('momentum', form.momentum, (v) => v >= 0 && v < 1, 'in [0, 1)')],
  ];
  for (const [name, value] of checks) {
    if (typeof value === 'string') return { error: value };
    if (value !== null) (command as Record<string, unknown>)[name] = value;
  }
  const beta1 = number('beta1', form.beta1, (v) => v >= 0 && v < 1, 'in [0, 1)');
  const beta2 = number('beta2', form.beta2, (v) => v >= 0 && v < 1, 'in [0, 1)');
  if (typeof beta1 === 'string') return { error: beta1 };
  if (typeof beta2 === 'string') return { error: beta2 };
  if ((beta1 === null) !== (beta2 === null)) return { error: 'betas need both beta1 and beta2' };
  if (beta1 !== null && beta2 !== null) command.betas = [beta1, beta2];
  if (Object.keys(command).length === 1) return { error: 'nothing to set: fill lr, weight decay, momentum or betas' };
  if (form.group !== '') command.group = Number(form.group);
  return { command };
}

/**
 * The values in force now, per group 0 of optimizer 0: the last reported learning rate,
 * overridden by every change made since that report (a `set` while paused takes effect at
 * once, but no step has reported it yet).
 */
export function currentValues(run: Pick<RunView, 'info' | 'hparams' | 'series'>): Partial<Record<HparamChange['name'], HparamChange['new']>> {
  const values: Partial<Record<HparamChange['name'], HparamChange['new']>> = {};
  const lr = run.info.latest.lr;
  if (typeof lr === 'number') values.lr = lr;
  const reported = run.series.lr?.steps.at(-1) ?? -1;
  for (const change of run.hparams) {
    if (change.optimizer !== 0 || change.group !== 0) continue;
    if (change.name !== 'lr' || change.step >= reported) values[change.name] = change.new;
  }
  return values;
}

/** `lr 0.001 · weight_decay 0.01 · betas (0.9, 0.999)`. */
export function describeValues(values: ReturnType<typeof currentValues>): string {
  return Object.entries(values)
    .map(([name, value]) => `${name} ${Array.isArray(value) ? `(${value.map((v) => formatNumber(v)).join(', ')})` : formatNumber(value as number)}`)
    .join(' · ');
}

/** Param groups the run reports a learning rate for (`lr`, `lr/group1`, …): at least one. */
export function groupCount(latest: Record<string, unknown>): number {
  let count = 1;
  for (const key of Object.keys(latest)) {
    const match = /^lr\/group(\d+)$/.exec(key);
    if (match) count = Math.max(count, Number(match[1]) + 1);
  }
  return count;
}

export class HparamsPanel {
  readonly element = h('section', { class: 'panel hparams', 'aria-label': 'Hyperparameters' });
  private readonly inputs = {
    lr: field('lr', 'lr'),
    weight_decay: field('weight decay', 'weight_decay'),
    momentum: field('momentum', 'momentum'),
    beta1: field('beta1', 'beta1'),
    beta2: field('beta2', 'beta2'),
  };
  private readonly group = h('select', { 'aria-label': 'Param group', 'data-testid': 'hparam-group' });
  private readonly apply = h('button', { 'data-testid': 'hparam-apply', title: 'Apply at the next batch boundary' }, 'Apply');
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'hparam-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private readonly current = h('span', { class: 'muted', 'data-testid': 'hparam-current' });
  private readonly history = h('ul', { class: 'hparam-history', 'data-testid': 'hparam-history' });
  private readonly failure = h('p', { class: 'error', 'data-testid': 'hparam-error', hidden: true });
  private runKey = '';
  private groups = -1;
  private historySignature = '';

  constructor(private readonly send: (command: CommandBody) => Promise<Outcome>) {
    this.apply.addEventListener('click', () => this.submit());
    const grid = h('div', { class: 'hparam-grid' });
    for (const input of Object.values(this.inputs)) grid.append(input.label);
    grid.append(h('label', {}, 'group', this.group));
    this.element.append(h('h3', {}, 'Hyperparameters'), grid, h('div', { class: 'toolbar' }, this.apply, this.current, this.ack), this.failure, this.history);
  }

  render(runKey: string, run: RunView | null, live: boolean): void {
    if (runKey !== this.runKey) {
      this.runKey = runKey;
      this.acks.show(runKey);
    }
    this.apply.disabled = !live;
    const latest = run?.info.latest ?? {};
    const now = run ? describeValues(currentValues(run)) : '';
    const text = now ? `now: ${now}` : '';
    if (this.current.textContent !== text) this.current.textContent = text;
    const groups = groupCount(latest);
    if (groups !== this.groups) {
      this.groups = groups;
      const chosen = this.group.value;
      fill(
        this.group,
        h('option', { value: '' }, 'all'),
        ...Array.from({ length: groups }, (_, g) => h('option', { value: String(g) }, String(g))),
      );
      this.group.value = Number(chosen) < groups ? chosen : '';
    }
    const failed = run?.hparamError ?? null;
    this.failure.hidden = failed === null;
    this.failure.textContent = failed ? describeFailure(failed) : '';
    const changes = run?.hparams ?? [];
    const signature = `${runKey}|${changes.length}|${changes.at(-1)?.seq ?? 0}`;
    if (signature !== this.historySignature) {
      this.historySignature = signature;
      fill(this.history, ...changes.slice(-8).map((c) => h('li', {}, `step ${c.step}: ${describeChange(c)}`)));
    }
  }

  private submit(): void {
    const form: HparamForm = {
      lr: this.inputs.lr.input.value,
      weight_decay: this.inputs.weight_decay.input.value,
      momentum: this.inputs.momentum.input.value,
      beta1: this.inputs.beta1.input.value,
      beta2: this.inputs.beta2.input.value,
      group: this.group.value,
    };
    const parsed = parseHparamForm(form);
    if ('error' in parsed) {
      this.acks.set(this.runKey, `set: ${parsed.error}`, 'error');
      return;
    }
    void this.acks.track(this.runKey, 'set', this.send(parsed.command));
  }
}

/** What an `hparam_error` says: the step, what failed, what was put back. */
export function describeFailure(failed: HparamError): string {
  const restored = failed.rolled_back.map((r) => `${r.name} of group ${r.group} back to ${formatValue(r.restored)}`);
  return `step ${failed.step}: the optimizer failed under the edit (${failed.message}); rolled back (${restored.join(', ')}) and paused`;
}

function formatValue(value: number | number[] | null): string {
  if (value === null) return 'unset';
  return Array.isArray(value) ? `(${value.map(formatNumber).join(', ')})` : formatNumber(value);
}

function field(text: string, name: string): { label: HTMLLabelElement; input: HTMLInputElement } {
  const input = h('input', { type: 'text', inputmode: 'decimal', placeholder: 'unchanged', 'aria-label': text, 'data-hparam': name, size: 9 });
  return { label: h('label', {}, text, input), input };
}
