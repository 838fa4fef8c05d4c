/**
 * The models of the selected run side by side (`compare`): the current model and every
 * finished fork, each evaluated on each fork's slice, the rest of the training set and the
 * validation set. One row per model, a loss and an accuracy column per target; the lowest
 * loss of each target is marked.
 */
import type { CommandBody, Outcome } from '../../common/messages';
import { fill, formatNumber, h } from '../dom';
import { bestLoss, parseCompare, type CompareTable } from '../forkReplies';
import { readReply } from '../sampleReplies';
import { AckLines } from './controls';

export interface CompareHooks {
  send(runKey: string, command: CommandBody): Promise<Outcome>;
}

export function compareCaption(table: CompareTable): string {
  return `${table.rows.length} models at step ${table.step} · ${table.duration.toFixed(1)} s`;
}

export class ComparePanel {
  readonly element = h('section', { class: 'panel compare', 'aria-label': 'Compare' });
  private readonly button = h('button', { class: 'small', 'data-testid': 'compare', title: 'Evaluate the model and its finished forks on every slice' }, 'Compare');
  private readonly caption = h('span', { class: 'muted readout', 'data-testid': 'compare-caption' });
  private readonly body = h('div', { class: 'table-scroll' });
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'compare-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private readonly tables = new Map<string, CompareTable>();
  private runKey = '';

  constructor(private readonly hooks: CompareHooks) {
    this.button.addEventListener('click', () => void this.compare());
    this.element.append(h('h3', {}, 'Compare'), h('div', { class: 'toolbar' }, this.button, this.caption), this.body, this.ack);
    this.draw();
  }

  render(runKey: string, live: boolean): void {
    this.button.disabled = !live;
    if (runKey === this.runKey) return;
    this.runKey = runKey;
    this.acks.show(runKey);
    this.draw();
  }

  private async compare(): Promise<void> {
    const key = this.runKey;
    const outcome = await this.acks.track(key, 'compare', this.hooks.send(key, { type: 'compare' }));
    if (!outcome.ok) return;
    if (outcome.data.cancelled === true) return this.acks.set(key, 'compare cancelled', 'error');
    const read = readReply(parseCompare, outcome.data);
    if ('error' in read) return this.acks.set(key, read.error, 'error');
    this.tables.set(key, read.value);
    this.acks.set(key, '', 'ok');
    if (key === this.runKey) this.draw();
  }

  private draw(): void {
    const table = this.tables.get(this.runKey);
    if (!table) {
      this.caption.textContent = '';
      fill(this.body, h('p', { class: 'muted' }, 'Compare evaluates the model and its forks on each slice and the validation set.'));
      return;
    }
    this.caption.textContent = compareCaption(table);
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
    fill(this.body, h('table', { 'data-testid': 'compare-table' }, h('thead', {}, top, sub), h('tbody', {}, ...rows)));
  }
}
