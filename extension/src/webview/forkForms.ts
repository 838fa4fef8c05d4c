/**
 * The fork and merge dialogs' fields, checked and turned into one command each, with the
 * rules the session applies (so a mistake is shown at once, next to the field, instead of
 * after a round trip): names as the session's selection names, budgets and sizes whole
 * numbers >= 1, learning rates and temperatures numbers > 0, merge weights one per model.
 */
import type { CommandBody } from '../common/messages';

/** Fork, merge and selection names: also file names on the training machine. */
export const NAME_RULE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const MERGE_METHODS = ['soup', 'greedy', 'fisher', 'distill', 'adapter'] as const;
export type MergeMethod = (typeof MERGE_METHODS)[number];

export type Checked = { command: CommandBody } | { error: string };

export interface ForkForm {
  /** The named train selection the fork trains on. */
  selection: string;
  /** Empty: the session names it `fork-<n>`. */
  name: string;
  amount: string;
  unit: 'steps' | 'epochs';
  /** Empty: the run's current learning rate. */
  lr: string;
  /** Empty: the training loader's. */
  batchSize: string;
  optimizer: 'fresh' | 'clone';
  /** Empty: the whole model trains; else low-rank adapters of this rank. */
  adapterRank: string;
}

export interface MergeForm {
  method: MergeMethod;
  forks: string[];
  name: string;
  /** Comma-separated (soup: the parent first, then each fork; adapter: each fork). */
  weights: string;
  optimizer: 'keep' | 'reset';
  /** Distillation: optimizer steps, learning rate (empty: the run's), temperature (empty:
   * chosen on validation). */
  steps: string;
  lr: string;
  temperature: string;
}

/** `null` when `text` is a valid name, else what is wrong with it. */
export function nameError(text: string, what: string): string | null {
  if (NAME_RULE.test(text)) return null;
  return `${what} "${text}" is not a valid name: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`;
}

function wholeNumber(text: string, what: string): number | string {
  const value = Number(text.trim());
  if (text.trim() === '' || !Number.isInteger(value) || value < 1) return `${what} "${text}" is not a whole number >= 1`;
  return value;
}

function positive(text: string, what: string): number | string {
  const value = Number(text.trim());
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0) return `${what} "${text}" is not a number > 0`;
  return value;
}

/** The `fork` command of a filled fork dialog, or the first thing wrong with it. */
export function forkCommand(form: ForkForm): Checked {
  const fields: Record<string, unknown> = { type: 'fork', selection: form.selection };
  const selectionError = nameError(form.selection, 'selection');
  if (selectionError) return { error: selectionError };
  const name = form.name.trim();
  if (name) {
    const error = nameError(name, 'fork name');
    if (error) return { error };
    fields.name = name;
  }
  const amount = wholeNumber(form.amount, `budget in ${form.unit}`);
  if (typeof amount === 'string') return { error: amount };
  fields[form.unit] = amount;
  const optional: [keyof ForkForm, string, string, (text: string, what: string) => number | string][] = [
    ['lr', 'lr', 'learning rate', positive],
    ['batchSize', 'batch_size', 'batch size', wholeNumber],
    ['adapterRank', 'adapter_rank', 'adapter rank', wholeNumber],
  ];
  for (const [key, wire, what, check] of optional) {
    const text = form[key].trim();
    if (!text) continue;
    const value = check(text, what);
    if (typeof value === 'string') return { error: value };
    fields[wire] = value;
  }
  if (fields.adapter_rank !== undefined && form.optimizer === 'clone') {
    return { error: "adapters are new parameters without optimizer state: choose a fresh optimizer, or no adapter rank" };
  }
  fields.optimizer = form.optimizer;
  return { command: fields as CommandBody };
}

/** The `merge` command of a filled merge dialog, or the first thing wrong with it. */
export function mergeCommand(form: MergeForm): Checked {
  if (!MERGE_METHODS.includes(form.method)) return { error: `unknown merge method "${form.method}"; expected ${MERGE_METHODS.join(', ')}` };
  if (form.forks.length === 0) return { error: 'choose at least one finished fork to merge' };
  const fields: Record<string, unknown> = { type: 'merge', method: form.method, forks: form.forks, optimizer: form.optimizer };
  const name = form.name.trim();
  if (name) {
    const error = nameError(name, 'merge name');
    if (error) return { error };
    fields.name = name;
  }
  const weights = form.weights.trim();
  if (weights) {
    if (form.method !== 'soup' && form.method !== 'adapter') return { error: `weights apply to soup and adapter merges, not ${form.method}` };
    const values = weights.split(',').map((w) => Number(w.trim()));
    const expected = form.method === 'soup' ? form.forks.length + 1 : form.forks.length;
    const whom = form.method === 'soup' ? 'the parent first, then each fork' : 'one per fork';
    if (values.length !== expected) return { error: `${values.length} weights for ${expected} models; expected ${expected} (${whom})` };
    if (values.some((v) => !Number.isFinite(v) || v < 0)) return { error: `weights "${weights}" must be numbers >= 0` };
    if (form.method === 'soup' && values.every((v) => v === 0)) return { error: 'soup weights are all 0; expected at least one above 0' };
    fields.weights = values;
  }
  if (form.method === 'distill') {
    const steps = wholeNumber(form.steps, 'distillation steps');
    if (typeof steps === 'string') return { error: steps };
    fields.steps = steps;
    if (form.temperature.trim()) {
      const temperature = positive(form.temperature, 'temperature');
      if (typeof temperature === 'string') return { error: temperature };
      fields.temperature = temperature;
    }
    if (form.lr.trim()) {
      const lr = positive(form.lr, 'learning rate');
      if (typeof lr === 'string') return { error: lr };
      fields.lr = lr;
    }
  }
  return { command: fields as CommandBody };
}
