/**
 * What the forks section says of the fork commands' replies (`fork`, `compare`, `merge`,
 * `discard_merge`, `cancel`, `lineage`) and of `fork_progress` events: captions, ack lines
 * and the rows of a merge report. The replies are the generated protocol types.
 */
import type { OutcomeOf } from '../common/replies';
import type { CompareReply, CompareTarget, ForkProgress, LineageView, LineageNode, MergeReply } from '../protocol.gen';
import { formatNumber } from './dom';

/** Per target, the row of the model with the lowest loss (-1: no model has one). */
export function bestLoss(table: Pick<CompareReply, 'rows' | 'targets'>): number[] {
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
  target: CompareTarget;
  before: number | null;
  after: number | null;
  /** after - before (negative: the merge lowered the loss). */
  change: number | null;
  accBefore: number | null;
  accAfter: number | null;
}

export function reportRows(report: MergeReply): ReportRow[] {
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
export function mergeCaption(report: MergeReply): string {
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
export function describeFork(outcome: OutcomeOf<'fork'>): string {
  if (!outcome.ok) return `fork failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  const head = `fork ${d.name}: ${d.status}, ${d.steps} steps in ${d.duration.toFixed(1)} s`;
  if (d.status === 'failed') return `${head}: ${d.message ?? 'unknown error'}`;
  const before = d.parent_slice_loss;
  const after = d.slice_loss;
  if (before === null || after === null) return head;
  return `${head} · slice loss ${formatNumber(before)} → ${formatNumber(after)}`;
}

/** What a `cancel` reply says: what it stopped, if anything. */
export function describeCancel(outcome: OutcomeOf<'cancel'>): string {
  if (!outcome.ok) return `cancel failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  if (!d.cancelled) return 'cancel: nothing was running';
  if (d.fork) return `cancel: stopping fork ${d.fork}`;
  if (d.merge) return `cancel: stopping merge ${d.merge}`;
  if (d.compare === true) return 'cancel: stopping the comparison';
  return 'cancel: stopping';
}

/** What a `discard_merge` reply says. */
export function describeDiscard(outcome: OutcomeOf<'discard_merge'>): string {
  if (!outcome.ok) return `discard failed: ${outcome.message} (${outcome.code})`;
  return `discarded ${outcome.data.name}: back to ${outcome.data.active} at step ${outcome.data.step}`;
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
