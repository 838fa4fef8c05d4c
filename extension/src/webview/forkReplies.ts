/**
 * The replies of the fork commands (`fork`, `compare`, `merge`, `discard_merge`, `lineage`)
 * and the `fork_progress` events, read into what the forks section shows. A reply without
 * the expected fields throws an Error naming what was wrong (`readReply` turns it into a
 * line for the page).
 */
import type { Outcome } from '../common/messages';
import type { ForkProgress, LineageEdge, LineageNode } from '../protocol.gen';
import { formatNumber } from './dom';

type Data = Record<string, unknown>;

/** A set of samples models are scored on: a fork's slice, the rest of the train set, val. */
export interface Target {
  name: string;
  kind: string;
  split: string;
  samples: number;
}

/** One model's mean loss and accuracy on each target (aligned with the targets). */
export interface Scores {
  loss: (number | null)[];
  accuracy: (number | null)[];
}

export interface ModelRow extends Scores {
  model: string;
  run: string;
  kind: string;
}

export interface CompareTable {
  step: number;
  duration: number;
  targets: Target[];
  rows: ModelRow[];
}

export interface MergeReport {
  name: string;
  run: string;
  method: string;
  forks: string[];
  /** Greedy soups: the models kept, by name. */
  kept: string[] | null;
  optimizer: string;
  step: number;
  duration: number;
  targets: Target[];
  before: Scores;
  after: Scores;
  /** Distillation statistics. */
  distill: Record<string, number> | null;
  /** Whether the merged weights replaced the run's (a merge worse on validation is not). */
  applied: boolean;
  /** Why it was not applied. */
  reason: string | null;
  /** The options chosen on validation from the grid (weights, temperature, strength). */
  choice: Record<string, unknown>;
}

export interface LineageView {
  active: string;
  nodes: LineageNode[];
  edges: LineageEdge[];
}

function list(data: Data, key: string, what: string): unknown[] {
  const value = data[key];
  if (!Array.isArray(value)) throw new Error(`${what} reply has no "${key}" list`);
  return value;
}

function object(value: unknown, what: string): Data {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${what} is not an object`);
  return value as Data;
}

function numbers(value: unknown, length: number, what: string): (number | null)[] {
  if (!Array.isArray(value) || value.length !== length) throw new Error(`${what} has no list of ${length} values`);
  return value.map((v) => (typeof v === 'number' && Number.isFinite(v) ? v : null));
}

function targets(data: Data, what: string): Target[] {
  return list(data, 'targets', what).map((raw) => {
    const t = object(raw, `a target of the ${what} reply`);
    return { name: String(t.name), kind: String(t.kind ?? ''), split: String(t.split ?? ''), samples: Number(t.samples ?? 0) };
  });
}

function scores(raw: unknown, n: number, what: string): Scores {
  const s = object(raw, what);
  return { loss: numbers(s.loss, n, `${what} loss`), accuracy: numbers(s.accuracy, n, `${what} accuracy`) };
}

export function parseCompare(data: Data): CompareTable {
  const found = targets(data, 'compare');
  const rows = list(data, 'rows', 'compare').map((raw, i) => {
    const row = object(raw, `row ${i} of the compare reply`);
    return { model: String(row.model), run: String(row.run ?? ''), kind: String(row.kind ?? ''), ...scores(row, found.length, `row ${i}`) };
  });
  return { step: Number(data.step ?? 0), duration: Number(data.duration ?? 0), targets: found, rows };
}

export function parseMerge(data: Data): MergeReport {
  const found = targets(data, 'merge');
  const kept = Array.isArray(data.kept) ? data.kept.map(String) : null;
  const distill = typeof data.distill === 'object' && data.distill !== null ? (data.distill as Record<string, number>) : null;
  return {
    name: String(data.name),
    run: String(data.run ?? data.name),
    method: String(data.method ?? ''),
    forks: Array.isArray(data.forks) ? data.forks.map(String) : [],
    kept,
    optimizer: String(data.optimizer ?? ''),
    step: Number(data.step ?? 0),
    duration: Number(data.duration ?? 0),
    targets: found,
    before: scores(data.before, found.length, 'before'),
    after: scores(data.after, found.length, 'after'),
    distill,
    applied: data.applied !== false,
    reason: typeof data.reason === 'string' ? data.reason : null,
    choice: typeof data.choice === 'object' && data.choice !== null ? (data.choice as Record<string, unknown>) : {},
  };
}

export function parseLineage(data: Data): LineageView {
  const nodes = list(data, 'nodes', 'lineage') as LineageNode[];
  const edges = list(data, 'edges', 'lineage') as LineageEdge[];
  for (const node of nodes) if (typeof node?.run !== 'string' || typeof node.kind !== 'string') throw new Error('a lineage node has no run or kind');
  return { active: String(data.active ?? ''), nodes, edges };
}

/** Per target, the row of the model with the lowest loss (-1: no model has one). */
export function bestLoss(table: Pick<CompareTable, 'rows' | 'targets'>): number[] {
  return table.targets.map((_, t) => {
    let best = -1;
    table.rows.forEach((row, r) => {
      const v = row.loss[t];
      if (v !== null && (best < 0 || v < (table.rows[best].loss[t] as number))) best = r;
    });
    return best;
  });
}

/** One row of a merge report: a target before and after. */
export interface ReportRow {
  target: Target;
  before: number | null;
  after: number | null;
  /** after - before (negative: the merge lowered the loss). */
  change: number | null;
  accBefore: number | null;
  accAfter: number | null;
}

export function reportRows(report: MergeReport): ReportRow[] {
  return report.targets.map((target, i) => {
    const before = report.before.loss[i];
    const after = report.after.loss[i];
    return {
      target,
      before,
      after,
      change: before !== null && after !== null ? after - before : null,
      accBefore: report.before.accuracy[i],
      accAfter: report.after.accuracy[i],
    };
  });
}

/** `merge-1: soup of hard, by-hand at step 836 · optimizer keep · 0.1 s` */
export function mergeCaption(report: MergeReport): string {
  const parts = [`${report.name}: ${report.method} of ${report.forks.join(', ')} at step ${report.step}`, `optimizer ${report.optimizer}`];
  if (report.kept) parts.push(`kept ${report.kept.join(', ') || 'none'}`);
  const chosen = Object.entries(report.choice).map(([k, v]) => `${k} ${Array.isArray(v) ? v.map((x) => formatNumber(Number(x))).join('/') : formatNumber(Number(v))}`);
  if (chosen.length) parts.push(`chosen on validation: ${chosen.join(', ')}`);
  if (!report.applied) parts.push('not applied');
  if (report.distill) parts.push(Object.entries(report.distill).map(([k, v]) => `${k} ${formatNumber(v)}`).join(', '));
  parts.push(`${report.duration.toFixed(1)} s`);
  return parts.join(' · ');
}

/** A fork's progress in one line, e.g. `fork hard: 64 / 200 steps (32 %) · loss 0.82 · 1.5 s`. */
export function describeForkProgress(progress: ForkProgress | null | undefined): string {
  if (!progress) return '';
  const elapsed = `${progress.elapsed.toFixed(1)} s`;
  const loss = progress.loss !== null ? ` · loss ${formatNumber(progress.loss)}` : '';
  switch (progress.state) {
    case 'running': {
      const of = progress.total ? ` / ${progress.total} steps (${Math.floor((100 * progress.step) / progress.total)} %)` : ' steps';
      return `fork ${progress.fork}: ${progress.step}${of}${loss} · ${elapsed}`;
    }
    case 'done':
      return `fork ${progress.fork} done: ${progress.step} steps${loss} · ${elapsed}`;
    case 'cancelled':
      return `fork ${progress.fork} cancelled after ${progress.step} steps`;
    case 'failed':
      return `fork ${progress.fork} failed after ${progress.step} steps: ${progress.message ?? 'unknown error'}`;
  }
}

/** What a `fork` reply says, e.g. `fork hard: done, 200 steps in 1.2 s · slice loss 1.73 → 0.41`. */
export function describeFork(outcome: Outcome): string {
  if (!outcome.ok) return `fork failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  const head = `fork ${String(d.name)}: ${String(d.status)}, ${String(d.steps)} steps in ${Number(d.duration ?? 0).toFixed(1)} s`;
  if (d.status === 'failed') return `${head}: ${String(d.message)}`;
  const before = d.parent_slice_loss as number | null;
  const after = d.slice_loss as number | null;
  if (typeof before !== 'number' || typeof after !== 'number') return head;
  return `${head} · slice loss ${formatNumber(before)} → ${formatNumber(after)}`;
}

/** What a `cancel` reply says: what it stopped, if anything. */
export function describeCancel(outcome: Outcome): string {
  if (!outcome.ok) return `cancel failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  if (d.cancelled !== true) return 'cancel: nothing was running';
  if (typeof d.fork === 'string') return `cancel: stopping fork ${d.fork}`;
  if (typeof d.merge === 'string') return `cancel: stopping merge ${d.merge}`;
  if (d.compare === true) return 'cancel: stopping the comparison';
  return 'cancel: stopping';
}

/** What a `discard_merge` reply says. */
export function describeDiscard(outcome: Outcome): string {
  if (!outcome.ok) return `discard failed: ${outcome.message} (${outcome.code})`;
  return `discarded ${String(outcome.data.name)}: back to ${String(outcome.data.active)} at step ${String(outcome.data.step)}`;
}

/** The forks a merge can take: finished ones (they have weights); adapter merges only those
 * trained with adapters. */
export function mergeableForks(lineage: LineageView | null, method: string): LineageNode[] {
  if (!lineage) return [];
  return lineage.nodes.filter((n) => n.kind === 'fork' && n.status === 'done' && (method !== 'adapter' || n.hparams.adapter_rank != null));
}

/** Whether the active model is a merge that `discard_merge` could still undo. */
export function canDiscard(lineage: LineageView | null): boolean {
  const active = lineage?.nodes.find((n) => n.run === lineage.active);
  return active?.kind === 'merge' && active.status === 'active';
}
