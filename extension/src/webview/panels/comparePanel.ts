/**
 * The models of the selected run side by side (`compare`): the current model and every
 * finished fork, each evaluated on each fork's slice, the rest of the training set and the
 * validation set. One row per model, a loss and an accuracy column per target; the lowest
 * loss of each target is marked.
 */
import type { CommandBody, Outcome } from '../../common/messages';
import { formatNumber, h } from '../dom';
import type { CompareReply } from '../../protocol.gen';
import { bestLoss } from '../forkText';
import { KeptReplies } from './keptReplies';

export interface CompareHooks {
  send(runKey: string, command: CommandBody): Promise<Outcome>;
}

export function compareCaption(table: CompareReply): string {
  return `${table.rows.length} models at step ${table.step} · ${table.duration.toFixed(1)} s`;
}

export class ComparePanel {
  readonly element = h('section', { class: 'panel compare', 'aria-label': 'Compare' });
  private readonly button = h('button', { class: 'small', 'data-testid': 'compare', title: 'Evaluate the model and its finished forks on every slice' }, 'Compare');
  private readonly caption = h('span', { class: 'muted readout', 'data-testid': 'compare-caption' });
  private readonly body = h('div', { class: 'table-scroll' });
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'compare-ack', 'aria-live': 'polite' });
  private readonly replies = new KeptReplies({
    command: 'compare',
    caption: this.caption,
    body: this.body,
    ack: this.ack,
    empty: 'Compare evaluates the model and its forks on each slice and the validation set.',
    describe: compareCaption,
    draw: compareTable,
  });

  constructor(private readonly hooks: CompareHooks) {
    this.button.addEventListener('click', () => void this.compare());
    this.element.append(h('h3', {}, 'Compare'), h('div', { class: 'toolbar' }, this.button, this.caption), this.body, this.ack);
  }

  render(runKey: string, live: boolean): void {
    this.button.disabled = !live;
    this.replies.show(runKey);
  }

  private async compare(): Promise<void> {
    const key = this.replies.key;
    await this.replies.track(key, this.hooks.send(key, { type: 'compare' }), { label: 'compare', cancelled: 'compare cancelled', done: () => '' });
  }
}

/** One row per model, a loss and an accuracy column per target; the lowest loss marked. */
function compareTable(table: CompareReply): HTMLElement {
  const best = bestLoss(table);
  const top = h(
    'tr',
    {},
    h('th', { rowspan: 2 }, 'model'),
    ...table.targets.map((t) => h('th', { colspan: 2, class: 'group', title: `${t.kind} of ${t.split}: ${t.samples} samples` }, t.name, h('span', { class: 'muted' }, ` (${t.samples})`))),
  );
  const sub = h('tr', {}, ...table.targets.flatMap(() => [h('th', {}, 'loss'), h('th', {}, 'acc')]));
  const rows = table.rows.map((row, r) =>
    h(
      'tr',
      { 'data-model': row.model, 'data-kind': row.kind },
      h('td', {}, row.model, h('span', { class: 'muted' }, ` ${row.kind}`)),
      ...table.targets.flatMap((_, t) => [
        h('td', { class: best[t] === r && table.rows.length > 1 ? 'better' : '' }, formatNumber(row.loss[t])),
        h('td', {}, formatNumber(row.accuracy[t], 3)),
      ]),
    ),
  );
  return h('table', { 'data-testid': 'compare-table' }, h('thead', {}, top, sub), h('tbody', {}, ...rows));
}
