/**
 * The samples of a named selection (hard samples, a loss range, a data-map region), a page
 * at a time (`selection_rows`), sorted by any column (click its header; again to reverse),
 * with their current statistics and the sample itself (a thumbnail, its text or a summary,
 * fetched for the rows shown: `sample_preview`). The main columns fit without scrolling. Export writes the whole selection to CSV, Parquet or JSON
 * on the training machine (`export_selection`): inside VS Code into a folder picked with the
 * editor's dialog, in a browser into the folder typed in the field. Fork… trains a copy of
 * the model on a train selection.
 */
import { replyOf, type OutcomeOf } from '../../common/replies';
import type { RowsReply, SelectionSummary } from '../../protocol.gen';
import { fill, formatBytes, formatNumber, h } from '../dom';
import type { RowColumn } from '../sampleData';
import { confirmReplace, refusedAsExisting } from '../overwrite';
import { PreviewCache, previewElement } from '../samplePreview';
import { AckLines, type Send } from './controls';
import type { ForkOpener } from './selections';

/** The columns in the order shown: the sample's identity first, then its numbers. */
export const SHOWN_COLUMNS: readonly RowColumn[] = ['index', 'label', 'loss', 'correct', 'confidence', 'variability', 'margin', 'count'];
/** CSS pixels of a row's thumbnail. */
const PREVIEW_PX = 36;

export const PAGE_ROWS = 50;
export const FORMATS = ['csv', 'parquet', 'json'] as const;
export type ExportFormat = (typeof FORMATS)[number];

export interface TableHooks {
  send: Send;
  /** The editor's folder dialog, when there is one. */
  chooseFolder?: () => Promise<string | null>;
  fork: ForkOpener;
}

export interface Sorting {
  sort: RowColumn;
  descending: boolean;
}

/** The sorting after a click on `column`'s header: the same column reverses, another starts descending. */
export function nextSorting(current: Sorting, column: RowColumn): Sorting {
  return column === current.sort ? { sort: column, descending: !current.descending } : { sort: column, descending: true };
}

/** `rows 51–100 of 240` */
export function pageLabel(page: Pick<RowsReply, 'offset' | 'total' | 'rows'>): string {
  if (page.total === 0) return 'no rows';
  return `rows ${page.offset + 1}–${page.offset + page.rows.length} of ${page.total}`;
}

export function describeExport(outcome: OutcomeOf<'export_selection'>): string {
  if (!outcome.ok) return `export failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  return `export: ${d.path} (${d.rows} rows, ${formatBytes(d.bytes)})`;
}

function cell(column: RowColumn, value: number | null): string {
  if (value === null) return '–';
  return column === 'index' || column === 'count' || column === 'label' ? String(value) : formatNumber(value);
}

export class SampleTable {
  readonly element = h('section', { class: 'panel sample-table', 'aria-label': 'Samples of a selection' });
  private readonly chooser = h('select', { 'aria-label': 'Selection', 'data-testid': 'selection' });
  private readonly prev = h('button', { class: 'small', 'data-testid': 'rows-prev' }, '‹ Prev');
  private readonly next = h('button', { class: 'small', 'data-testid': 'rows-next' }, 'Next ›');
  private readonly pageText = h('span', { class: 'muted', 'data-testid': 'rows-page' });
  private readonly forkButton = h('button', { class: 'small', 'data-testid': 'selection-fork', title: 'Train a copy of the model on this selection (train selections)' }, 'Fork…');
  private readonly body = h('div', { class: 'table-scroll' });
  private readonly format = h('select', { 'aria-label': 'Export format', 'data-testid': 'export-format' }, ...FORMATS.map((f) => h('option', { value: f }, f)));
  private readonly directory = h('input', { type: 'text', placeholder: '/folder/on/the/training/machine', 'aria-label': 'Export folder', 'data-testid': 'export-dir', size: 28 });
  private readonly exportButton = h('button', { 'data-testid': 'export-selection', title: 'Write the whole selection to a file on the training machine' }, 'Export…');
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'export-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private selections: SelectionSummary[] = [];
  private page: RowsReply | null = null;
  private sorting: Sorting = { sort: 'loss', descending: true };
  private offset = 0;
  /** The selection the table shows (kept when the list is fetched again). */
  private shown = '';
  private runKey = '';
  private live = false;
  private ticket = 0;
  /** Previews of the run shown, by split. */
  private previews = new Map<string, PreviewCache>();

  constructor(private readonly hooks: TableHooks) {
    this.directory.hidden = Boolean(hooks.chooseFolder);
    this.chooser.addEventListener('change', () => this.open(this.chooser.value));
    this.prev.addEventListener('click', () => this.load(Math.max(0, this.offset - PAGE_ROWS)));
    this.next.addEventListener('click', () => this.load(this.offset + PAGE_ROWS));
    this.exportButton.addEventListener('click', () => void this.export());
    this.forkButton.addEventListener('click', () => {
      const chosen = this.selections.find((s) => s.name === this.chooser.value);
      if (chosen) hooks.fork(this.runKey, chosen.name, chosen.size);
    });
    this.element.append(
      h('h3', {}, 'Selected samples'),
      h('div', { class: 'toolbar' }, this.chooser, this.prev, this.next, this.pageText, this.forkButton),
      this.body,
      h('div', { class: 'toolbar export-bar' }, this.format, this.directory, this.exportButton),
      this.ack,
    );
    this.showRows();
  }

  show(runKey: string, live: boolean): void {
    this.live = live;
    this.updateButtons();
    if (runKey === this.runKey) return;
    this.runKey = runKey;
    this.acks.show(runKey);
    this.previews = new Map();
    this.selections = [];
    this.page = null;
    this.shown = '';
    this.ticket++;
    this.showRows();
    void this.listSelections(null);
  }

  /** List the run's selections and show `name` (`null`: the one shown, else the newest). */
  async listSelections(name: string | null): Promise<void> {
    if (!this.runKey || !this.live) return;
    const key = this.runKey;
    const outcome = replyOf('selections', await this.hooks.send({ type: 'selections' }));
    if (key !== this.runKey || !outcome.ok) return;
    this.selections = outcome.data.selections;
    fill(this.chooser, ...this.selections.map((s) => h('option', { value: s.name }, `${s.name} (${s.size}, ${s.split})`)));
    const current = this.selections.some((s) => s.name === this.shown) ? this.shown : null;
    const chosen = name ?? current ?? this.selections.at(-1)?.name ?? '';
    if (chosen) this.open(chosen);
    else this.showRows();
  }

  private open(name: string): void {
    this.shown = name;
    this.chooser.value = name;
    this.load(0);
  }

  private load(offset: number): void {
    const name = this.chooser.value;
    if (!name) return;
    const ticket = ++this.ticket;
    const { sort, descending } = this.sorting;
    void this.hooks.send({ type: 'selection_rows', name, offset, limit: PAGE_ROWS, sort, descending }).then((raw) => {
      if (ticket !== this.ticket) return;
      const outcome = replyOf('selection_rows', raw);
      this.page = outcome.ok ? outcome.data : null;
      if (!outcome.ok) this.pageText.textContent = `cannot read ${name}: ${outcome.message}`;
      else this.offset = outcome.data.offset;
      this.showRows();
    });
  }

  private showRows(): void {
    this.updateButtons();
    const page = this.page;
    if (!page) {
      if (!this.chooser.value) {
        this.pageText.textContent = '';
        fill(this.body, h('p', { class: 'muted' }, 'No selection yet: drag across the histogram or pick a data-map region.'));
      }
      return;
    }
    this.pageText.textContent = pageLabel(page);
    const head = h(
      'tr',
      {},
      ...SHOWN_COLUMNS.flatMap((column) => {
        const sorted = column === this.sorting.sort;
        const button = h('button', { class: 'sort', 'data-sort': column, 'aria-sort': sorted ? (this.sorting.descending ? 'descending' : 'ascending') : undefined }, column, sorted ? (this.sorting.descending ? ' ▾' : ' ▴') : '');
        button.addEventListener('click', () => {
          this.sorting = nextSorting(this.sorting, column);
          this.load(0);
        });
        const th = h('th', { class: `col-${column}` }, button);
        return column === 'index' ? [th, h('th', { class: 'col-sample' }, 'sample')] : [th];
      }),
    );
    const split = this.selections.find((s) => s.name === this.chooser.value)?.split ?? 'train';
    const cache = this.previewsOf(split);
    const slots = new Map<number, HTMLElement>();
    const rows = page.rows.map((row) => {
      const slot = h('td', { class: 'col-sample' }, previewElement(row.index === null ? undefined : cache.get(row.index), PREVIEW_PX));
      if (row.index !== null) slots.set(row.index, slot);
      const cells = SHOWN_COLUMNS.flatMap((c) => (c === 'index' ? [h('td', { class: `col-${c}` }, cell(c, row[c])), slot] : [h('td', { class: `col-${c}` }, cell(c, row[c]))]));
      return h('tr', { 'data-index': row.index ?? '' }, ...cells);
    });
    fill(this.body, h('table', { class: 'samples-table', 'data-testid': 'sample-rows' }, h('thead', {}, head), h('tbody', {}, ...rows)));
    const ticket = this.ticket;
    void cache.fetch([...slots.keys()]).then(() => {
      if (ticket !== this.ticket || cache !== this.previews.get(split)) return;
      for (const [index, slot] of slots) fill(slot, previewElement(cache.get(index), PREVIEW_PX));
    });
  }

  private previewsOf(split: string): PreviewCache {
    let cache = this.previews.get(split);
    if (!cache) {
      cache = new PreviewCache((command) => this.hooks.send(command), split);
      this.previews.set(split, cache);
    }
    return cache;
  }

  private updateButtons(): void {
    const page = this.page;
    this.prev.disabled = !this.live || !page || page.offset === 0;
    this.next.disabled = !this.live || !page || page.offset + page.rows.length >= page.total;
    this.exportButton.disabled = !this.live || !this.chooser.value;
    this.forkButton.disabled = !this.live || this.selections.find((s) => s.name === this.chooser.value)?.split !== 'train';
    this.chooser.disabled = !this.live;
  }

  private async export(): Promise<void> {
    const key = this.runKey;
    const name = this.chooser.value;
    const directory = this.hooks.chooseFolder ? await this.hooks.chooseFolder() : this.directory.value.trim();
    if (directory === null) return;
    if (!directory) {
      this.acks.set(key, 'export: type the absolute path of a folder on the training machine first', 'error');
      this.directory.focus();
      return;
    }
    const format = this.format.value as ExportFormat;
    const command = { type: 'export_selection', name, format, directory } as const;
    let outcome = await this.acks.track(key, 'export', this.hooks.send(command));
    if (refusedAsExisting(outcome) && (await confirmReplace(this.ack, `${name}.${format} in ${directory}`))) {
      outcome = await this.acks.track(key, 'export', this.hooks.send({ ...command, overwrite: true }));
    }
    this.acks.set(key, describeExport(replyOf('export_selection', outcome)), outcome.ok ? 'ok' : 'error');
  }
}
