/**
 * Merges of the selected run: Merge… opens the merge dialog; the report shows the loss and
 * accuracy before and after on each fork's slice, the rest of the training set and the
 * validation set; Discard puts the pre-merge weights and optimizer state back while the run
 * is still paused (`discard_merge`).
 */
import type { CommandBody, Outcome } from '../../common/messages';
import { formatNumber, h } from '../dom';
import { replyOf } from '../../common/replies';
import type { LineageView, MergeReply } from '../../protocol.gen';
import { canDiscard, describeDiscard, mergeCaption, reportRows } from '../forkText';
import { MergeDialog } from './mergeDialog';
import { KeptReplies } from './keptReplies';

export interface MergeHooks {
  /** Send `command` to run `runKey`, tracked as busy (Cancel stops it). */
  send(runKey: string, command: CommandBody): Promise<Outcome>;
}

/** `-0.16` / `+0.04`, the sign always shown. */
export function signed(value: number | null): string {
  if (value === null) return '–';
  return `${value > 0 ? '+' : value < 0 ? '−' : '±'}${formatNumber(Math.abs(value))}`;
}

export class MergePanel {
  readonly element = h('section', { class: 'panel merge', 'aria-label': 'Merge' });
  readonly dialog: MergeDialog;
  private readonly mergeButton = h('button', { class: 'small', 'data-testid': 'merge-open', title: 'Merge finished forks into the paused model' }, 'Merge…');
  private readonly discardButton = h('button', { class: 'small', 'data-testid': 'merge-discard', title: 'Undo the latest merge (while still paused)' }, 'Discard');
  private readonly caption = h('p', { class: 'muted plot-caption', 'data-testid': 'merge-caption' });
  private readonly body = h('div', { class: 'table-scroll' });
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'merge-ack', 'aria-live': 'polite' });
  private readonly replies = new KeptReplies({
    command: 'merge',
    caption: this.caption,
    body: this.body,
    ack: this.ack,
    empty: 'No merge yet: fork on a slice, then Merge… its fork into the run.',
    describe: mergeCaption,
    draw: reportTable,
  });
  private lineage: LineageView | null = null;
  private paused = false;

  constructor(private readonly hooks: MergeHooks) {
    this.dialog = new MergeDialog((key, command) => void this.merge(key, command));
    this.mergeButton.addEventListener('click', () => this.dialog.open(this.replies.key, this.lineage, this.paused));
    this.discardButton.addEventListener('click', () => void this.discard());
    this.element.append(h('h3', {}, 'Merge'), h('div', { class: 'toolbar' }, this.mergeButton, this.discardButton), this.caption, this.body, this.ack, this.dialog.element);
  }

  render(runKey: string, lineage: LineageView | null, live: boolean, paused: boolean): void {
    this.lineage = lineage;
    this.paused = paused;
    this.mergeButton.disabled = !live;
    this.discardButton.disabled = !paused || !canDiscard(lineage);
    if (this.dialog.openFor === runKey) this.dialog.setPaused(paused);
    this.replies.show(runKey);
  }

  private async merge(key: string, command: CommandBody): Promise<void> {
    const method = 'method' in command ? String(command.method) : '';
    await this.replies.track(key, this.hooks.send(key, command), {
      label: `merge (${method})`,
      cancelled: 'merge cancelled',
      done: (report) =>
        report.applied
          ? `merged ${report.name}: training resumes from it (Discard undoes it while paused)`
          : `${report.name} not applied: ${report.reason ?? 'worse than the paused model on validation'}`,
    });
  }

  private async discard(): Promise<void> {
    const key = this.replies.key;
    const outcome = await this.replies.acks.track(key, 'discard', this.hooks.send(key, { type: 'discard_merge' }));
    this.replies.acks.set(key, describeDiscard(replyOf('discard_merge', outcome)), outcome.ok ? 'ok' : 'error');
  }
}

/** Per target: samples, loss before and after, the change (marked), accuracy before and after. */
function reportTable(report: MergeReply): HTMLElement {
  const rows = reportRows(report).map((row) =>
    h(
      'tr',
      { 'data-target': row.target.name },
      h('td', {}, row.target.name, row.target.kind !== row.target.name && h('span', { class: 'muted' }, ` ${row.target.kind}`)),
      h('td', {}, String(row.target.samples)),
      h('td', { 'data-before': '' }, formatNumber(row.before)),
      h('td', { 'data-after': '' }, formatNumber(row.after)),
      h('td', { class: row.change === null ? '' : row.change < 0 ? 'better' : row.change > 0 ? 'worse' : '' }, signed(row.change)),
      h('td', {}, formatNumber(row.accBefore, 3)),
      h('td', {}, formatNumber(row.accAfter, 3)),
    ),
  );
  const head = h('tr', {}, ...['target', 'samples', 'loss before', 'loss after', 'change', 'acc before', 'acc after'].map((t) => h('th', {}, t)));
  return h('table', { 'data-testid': 'merge-report' }, h('thead', {}, head), h('tbody', {}, ...rows));
}
