/**
 * The runs table: every run the page knows, one row each — project and run, state, step,
 * alerts, the last and best value of each metric, and the run's configuration (optimizer,
 * learning rate, batch size, the module's hyperparameters). Sort by any column (click its
 * header, again to reverse), filter by text (every word must match the run, its state or a
 * `name=value` of its configuration), tick runs to compare them on the charts.
 *
 * "Best" is the lowest value of a metric named like a loss or an error (`loss`, `val/mse`,
 * `wer`), the highest of one named like a score (`acc`, `f1`, `auc`, `iou`); other metrics
 * (`lr`, `grad_norm`, your own) show their last value only.
 */
import type { DashboardState, Pill } from '../../common/state';
import { pill } from '../../common/state';
import type { RunInfo } from '../../protocol.gen';
import { fill, formatNumber, h } from '../dom';
import { ALERT_TITLES } from './alerts';
import { chartOrder } from './metrics';
import { pillElement, type RunEntry, type RunRef } from './runPicker';

export type Direction = 'min' | 'max';
export type ConfigValue = RunInfo['config'][string];

const LOWER_IS_BETTER = /(^|[/_])(loss|err|error|nll|mse|mae|rmse|perplexity|ppl|wer|cer)($|[/_])/i;
const HIGHER_IS_BETTER = /(^|[/_])(acc|accuracy|f1|auc|auroc|precision|recall|iou|miou|dice|map|bleu|rouge|r2|score)($|[/_])/i;

/** Which way a metric improves, from its name (`null`: its name does not say). */
export function bestDirection(key: string): Direction | null {
  if (LOWER_IS_BETTER.test(key)) return 'min';
  if (HIGHER_IS_BETTER.test(key)) return 'max';
  return null;
}

export interface MetricSummary {
  last: number | null;
  best: number | null;
}

/** The last finite value and the best one (by `direction`) of `values`. */
export function summarize(values: readonly (number | null)[], direction: Direction | null): MetricSummary {
  let last: number | null = null;
  let best: number | null = null;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    last = v;
    if (direction && (best === null || (direction === 'min' ? v < best : v > best))) best = v;
  }
  return { last, best };
}

export interface RunRow {
  key: string;
  ref: RunRef;
  project: string;
  name: string;
  label: string;
  depth: number;
  pill: Pill;
  alerts: RunInfo['alerts'];
  step: number;
  startedAt: number;
  metrics: Record<string, MetricSummary>;
  config: RunInfo['config'];
}

/** The table's rows, in the run list's order. */
export function runRows(state: DashboardState, entries: readonly RunEntry[], keyOf: (ref: RunRef) => string): RunRow[] {
  return entries.map((entry) => {
    const source = state.sources[entry.ref.source];
    const run = source.runs[entry.ref.run];
    const metrics: Record<string, MetricSummary> = {};
    for (const [key, series] of Object.entries(run.series)) {
      const summary = summarize(series.values, bestDirection(key));
      const latest = run.info.latest[key];
      if (typeof latest === 'number' && Number.isFinite(latest)) summary.last = latest;
      metrics[key] = summary;
    }
    return {
      key: keyOf(entry.ref),
      ref: entry.ref,
      project: entry.project,
      name: entry.name,
      label: entry.label,
      depth: entry.depth,
      pill: pill(source, run),
      alerts: run.info.alerts,
      step: run.info.step,
      startedAt: run.info.started_at,
      metrics,
      config: run.info.config,
    };
  });
}

export interface Column {
  id: string;
  title: string;
  value(row: RunRow): number | string | null;
  /** A numeric column (right-aligned, compared as numbers). */
  numeric: boolean;
  /** How a cell shows its value (default: the number, 4 significant digits). */
  display?(row: RunRow): string;
}

/** Every column of `rows`: the fixed ones, each metric's last (and best), each config key. */
export function columnsOf(rows: readonly RunRow[]): Column[] {
  const fixed: Column[] = [
    { id: 'run', title: 'run', numeric: false, value: (r) => `${r.project}/${r.name}` },
    { id: 'state', title: 'state', numeric: false, value: (r) => r.pill },
    { id: 'step', title: 'step', numeric: true, value: (r) => r.step },
    { id: 'alerts', title: 'alerts', numeric: false, value: (r) => r.alerts.map((k) => ALERT_TITLES[k]).join(', ') || null },
    { id: 'started', title: 'started', numeric: true, value: (r) => r.startedAt, display: (r) => new Date(r.startedAt * 1000).toLocaleString([], { hour12: false }) },
  ];
  const metricKeys = chartOrder(rows.flatMap((r) => Object.keys(r.metrics)));
  const metrics = metricKeys.flatMap((key): Column[] => {
    const last: Column = { id: `m:${key}:last`, title: key, numeric: true, value: (r) => r.metrics[key]?.last ?? null };
    const direction = bestDirection(key);
    if (!direction) return [last];
    const best: Column = { id: `m:${key}:best`, title: `${key} (${direction === 'min' ? 'min' : 'max'})`, numeric: true, value: (r) => r.metrics[key]?.best ?? null };
    return [last, best];
  });
  const configKeys = [...new Set(rows.flatMap((r) => Object.keys(r.config)))];
  const config = configKeys.map((key): Column => {
    const numeric = rows.every((r) => r.config[key] === undefined || r.config[key] === null || typeof r.config[key] === 'number');
    return { id: `c:${key}`, title: key, numeric, value: (r) => configCell(r.config[key]) };
  });
  return [...fixed, ...metrics, ...config];
}

function configCell(value: ConfigValue): number | string | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'boolean' ? String(value) : value;
}

/** The rows every word of `text` matches (case-insensitively; `name=value` matches a config value). */
export function filterRows(rows: readonly RunRow[], text: string): RunRow[] {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return rows.slice();
  return rows.filter((row) => {
    const haystack = [
      `${row.project}/${row.name}`,
      row.label,
      row.pill,
      ...row.alerts,
      ...Object.entries(row.config).map(([k, v]) => `${k}=${v}`),
    ]
      .join(' ')
      .toLowerCase();
    return words.every((word) => haystack.includes(word));
  });
}

/** `rows` sorted by `column` (empty cells last, whichever the direction). */
export function sortRows(rows: readonly RunRow[], column: Column | undefined, descending: boolean): RunRow[] {
  if (!column) return rows.slice();
  const sign = descending ? -1 : 1;
  return rows.slice().sort((a, b) => {
    const va = column.value(a);
    const vb = column.value(b);
    if (va === null || vb === null) return va === vb ? 0 : va === null ? 1 : -1;
    if (typeof va === 'number' && typeof vb === 'number') return sign * (va - vb);
    return sign * String(va).localeCompare(String(vb), undefined, { numeric: true });
  });
}

export interface TableView {
  sort: string;
  descending: boolean;
  filter: string;
}

export interface RunsTableHooks {
  select(ref: RunRef): void;
  toggleCompare(key: string, on: boolean): void;
  change(view: Partial<TableView>): void;
}

export class RunsTable {
  readonly element = h('section', { class: 'panel runs-table', 'aria-label': 'Runs' });
  private readonly filter = h('input', { type: 'search', placeholder: 'filter: run, state, lr=0.001 …', 'aria-label': 'Filter runs', 'data-testid': 'runs-filter', size: 32 });
  private readonly count = h('span', { class: 'muted', 'data-testid': 'runs-count' });
  private readonly body = h('div', { class: 'table-scroll wide' });
  private signature = '';
  /** What the table's rows and columns are; the same structure only updates the cells. */
  private structure = '';
  private cells = new Map<string, HTMLElement[]>();
  private view: TableView = { sort: 'started', descending: true, filter: '' };

  constructor(private readonly hooks: RunsTableHooks) {
    this.filter.addEventListener('input', () => hooks.change({ filter: this.filter.value }));
    this.element.append(
      h('h3', {}, 'Runs'),
      h('p', { class: 'muted hint' }, 'Tick runs to compare them on the charts (one colour each); click a run to select it.'),
      h('div', { class: 'toolbar' }, this.filter, this.count),
      this.body,
    );
  }

  render(rows: readonly RunRow[], compared: ReadonlyMap<string, string>, selected: string, view: TableView): void {
    if (this.filter.value !== view.filter && document.activeElement !== this.filter) this.filter.value = view.filter;
    const signature = JSON.stringify([rows, [...compared], selected, view]);
    if (signature === this.signature) return;
    this.signature = signature;
    this.view = view;
    const columns = columnsOf(rows);
    const shown = sortRows(filterRows(rows, view.filter), columns.find((c) => c.id === view.sort), view.descending);
    this.count.textContent = `${shown.length} of ${rows.length} runs`;
    if (rows.length === 0) {
      this.structure = '';
      fill(this.body, h('p', { class: 'muted empty-state' }, 'No run yet: start a training script that uses OnTheFly; it appears here.'));
      return;
    }
    // Steps and metrics change several times a second while runs train: rebuilding the rows
    // each time would swallow clicks on them, so only their cells' text is updated then.
    const structure = JSON.stringify([columns.map((c) => c.id), shown.map((r) => r.key), [...compared], selected, view.sort, view.descending]);
    if (structure === this.structure) {
      for (const row of shown) this.updateCells(row, columns);
      return;
    }
    this.structure = structure;
    this.cells = new Map();
    const head = h('tr', {}, h('th', { class: 'compare-cell', title: 'Compare on the charts' }, 'cmp'), ...columns.map((c) => this.header(c)));
    const body = shown.map((row) => this.row(row, columns, compared.get(row.key), row.key === selected));
    fill(this.body, h('table', { 'data-testid': 'runs-table' }, h('thead', {}, head), h('tbody', {}, ...body)));
  }

  private updateCells(row: RunRow, columns: Column[]): void {
    const cells = this.cells.get(row.key);
    if (!cells) return;
    columns.forEach((column, i) => {
      const cell = cells[i];
      if (column.id === 'run') return;
      if (column.id === 'state') {
        if (cell.textContent !== row.pill) fill(cell, pillElement(row.pill));
        return;
      }
      const text = cellText(column, row);
      if (cell.textContent !== text) cell.textContent = text;
    });
  }

  private header(column: Column): HTMLElement {
    const sorted = column.id === this.view.sort;
    const arrow = sorted ? (this.view.descending ? ' ▾' : ' ▴') : '';
    const button = h('button', { class: 'sort', 'data-sort': column.id, 'aria-sort': sorted ? (this.view.descending ? 'descending' : 'ascending') : undefined }, column.title, arrow);
    button.addEventListener('click', () => this.hooks.change({ sort: column.id, descending: sorted ? !this.view.descending : column.numeric }));
    return h('th', { class: column.numeric ? 'num' : '' }, button);
  }

  private row(row: RunRow, columns: Column[], color: string | undefined, selected: boolean): HTMLElement {
    const box = h('input', { type: 'checkbox', checked: color !== undefined, 'data-testid': 'compare-run', 'aria-label': `Compare ${row.name}` });
    box.addEventListener('change', () => this.hooks.toggleCompare(row.key, box.checked));
    const swatch = h('span', { class: 'swatch' });
    if (color) swatch.style.background = color;
    const cells = columns.map((column) => {
      if (column.id === 'run') {
        const name = h('button', { class: 'link', 'data-testid': 'runs-select' }, `${row.project}/${row.name}`);
        name.addEventListener('click', () => this.hooks.select(row.ref));
        return h('td', { class: 'run-cell', title: row.label }, name);
      }
      if (column.id === 'state') return h('td', {}, pillElement(row.pill));
      return h('td', { class: column.numeric ? 'num' : '' }, cellText(column, row));
    });
    this.cells.set(row.key, cells);
    return h('tr', { 'data-run': row.key, 'aria-selected': String(selected) }, h('td', { class: 'compare-cell' }, box, swatch), ...cells);
  }
}

/** What a cell shows: the column's own display, a number to 4 digits, text, or `–`. */
export function cellText(column: Column, row: RunRow): string {
  const value = column.value(row);
  if (value === null) return '–';
  if (column.display) return column.display(row);
  return typeof value === 'number' ? formatNumber(value, 4) : value;
}
