/**
 * What the sample panels share about named selections: how a panel hands a train selection
 * to the fork dialog, and the line a `select` reply shows. The section (`samples.ts`) and each
 * panel import it; no panel imports the section back.
 */
import type { OutcomeOf } from '../../common/replies';
import { formatNumber } from '../dom';

/** Open the fork dialog on train selection `name` (`size` samples) of run `runKey`. */
export type ForkOpener = (runKey: string, name: string, size: number | null) => void;

/** What a `select` reply says, e.g. `selected hard: 120 samples, loss 2.1 – 7.5`. */
export function describeSelection(outcome: OutcomeOf<'select'>): string {
  if (!outcome.ok) return `select failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  const head = `selected ${d.name}: ${d.size} samples`;
  if (d.loss_min === null || d.loss_max === null) return head;
  return `${head}, loss ${formatNumber(d.loss_min)} – ${formatNumber(d.loss_max)}`;
}
