/**
 * The metric charts: one chart per metric, its splits overlaid (`loss`, `val/loss` and
 * `test/loss` on one chart), for the selected run alone or for every run compared (one colour
 * per run, the same metric on the same chart). Charts keep one order, whatever the run:
 * `loss` first, then the run's own metrics by name, then learning rates and gradient norms.
 * Each chart has its log-scale toggle (remembered); the options shared by every chart are
 * the x axis (steps or epochs) and smoothing.
 */
import type { Points } from '../../common/decimate';
import { chartGroups, parseSeriesKey, type Split } from '../../common/series';
import type { RunView } from '../../common/state';
import type { HistoryReply } from '../../protocol.gen';
import { axisFor, type XAxis } from '../axis';
import { MetricChart, type ChartSeries, type FetchHistory, type Marker } from '../charts';
import { fill, h } from '../dom';
import { alertMarkers, hparamMarkers } from '../markers';
import { SPLIT_COLORS } from '../palette';
import type { Smoothing } from '../smoothing';

export interface ChartOptions {
  axis: XAxis;
  smoothing: Smoothing;
  /** Charts (metric names) the reader unticked. */
  hidden: string[];
  /** Charts shown with a log y axis. */
  logCharts: string[];
  /** Only the charts whose name matches (a regular expression, else plain text). */
  chartFilter: string;
}

/** One run the charts draw; `color` set when several runs are compared. */
export interface ChartRun {
  key: string;
  /** Its short name in legends (`cnn`, `demo/cnn`). */
  label: string;
  run: RunView;
  color: string | null;
}

export interface MetricsHooks {
  history: FetchHistory;
  savePng(name: string, dataUrl: string): void;
  changeOptions(options: Partial<ChartOptions>): void;
}

/** The points of a `history` reply's series. */
export function historyPoints(reply: HistoryReply): Points {
  return { steps: reply.series.steps, values: reply.series.values };
}

const BUILT_IN = /^(lr|grad_norm)(\/|$)/;

/**
 * Chart names in the order they are shown: `loss` first, the run's own metrics by name, then
 * the built-in learning rates and gradient norms.
 *
 * Example: `chartOrder(['lr', 'acc', 'loss', 'grad_norm'])` gives `['loss', 'acc', 'grad_norm', 'lr']`.
 */
export function chartOrder(names: Iterable<string>): string[] {
  const rank = (name: string): number => (name === 'loss' ? 0 : BUILT_IN.test(name) ? 2 : 1);
  return [...new Set(names)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** The y axis title of a metric: its name, with the unit its name says (`step_time (s)`). */
export function axisTitle(name: string): string {
  if (/(^|_)(time|seconds|secs|duration)$/.test(name)) return `${name} (s)`;
  if (/_ms$/.test(name)) return `${name} (ms)`;
  if (/bytes$/.test(name)) return `${name} (bytes)`;
  if (/^grad_norm/.test(name)) return `${name} (L2)`;
  return name;
}

const STYLES: Record<Split, Pick<ChartSeries, 'style' | 'dense'>> = {
  train: { style: 'line', dense: true },
  val: { style: 'line+points', dense: false },
  test: { style: 'points', dense: false },
};

/** The series of chart `name` for `runs` (the first one's splits first, then the others'). */
export function chartSeries(name: string, runs: readonly ChartRun[], axis: XAxis): ChartSeries[] {
  const compared = runs.length > 1;
  const out: ChartSeries[] = [];
  for (const { key: runKey, label, run, color } of runs) {
    const keys = chartGroups(Object.keys(run.series)).get(name) ?? [];
    const last = run.series[keys[0]]?.steps.at(-1) ?? run.info.step;
    const map = axisFor(axis, run.epochStarts, last);
    for (const key of keys) {
      const split = parseSeriesKey(key).split;
      out.push({
        id: `${runKey}|${key}`,
        runKey,
        key,
        split,
        label: compared ? (split === 'train' ? label : `${label} · ${split}`) : split,
        color: color ?? SPLIT_COLORS[split],
        ...STYLES[split],
        dash: compared && split === 'val' ? [6, 3] : undefined,
        data: run.series[key],
        map,
        clock: run.clock,
        startedAt: run.info.started_at,
        epochStarts: run.epochStarts,
      });
    }
  }
  return out;
}

/** Whether chart `name` passes `filter`: a case-insensitive regular expression, or plain text
 * when it is not a valid one (`los` and `^val` both work). */
export function matchesFilter(name: string, filter: string): boolean {
  const text = filter.trim();
  if (!text) return true;
  try {
    return new RegExp(text, 'i').test(name);
  } catch {
    return name.toLowerCase().includes(text.toLowerCase());
  }
}

/** Chart drawing per frame, so input is never kept waiting behind a round of redraws. */
const FRAME_BUDGET_MS = 8;

interface Shown {
  chart: MetricChart;
  card: HTMLElement;
  legend: HTMLElement;
  log: HTMLInputElement;
  /** The series revisions and options last drawn. */
  drawn: string;
}

export class MetricsPanel {
  readonly element = h('section', { class: 'metrics', 'aria-label': 'Metrics' });
  private readonly chooser = h('div', { class: 'chooser' });
  private readonly grid = h('div', { class: 'charts' });
  private readonly empty = h('p', { class: 'muted empty-state', 'data-testid': 'charts-empty' });
  private readonly axisSelect = h(
    'select',
    { 'aria-label': 'X axis', 'data-testid': 'axis' },
    h('option', { value: 'step' }, 'Steps'),
    h('option', { value: 'epoch' }, 'Epochs'),
  );
  private readonly smoothingSelect = h(
    'select',
    { 'aria-label': 'Smoothing' },
    h('option', { value: 'none' }, 'No smoothing'),
    h('option', { value: 'ema' }, 'EMA'),
    h('option', { value: 'mean' }, 'Moving average'),
  );
  private readonly strength = h('input', { type: 'range', min: 0, max: 100, value: 60, 'aria-label': 'Smoothing strength' });
  private readonly filter = h('input', { type: 'search', placeholder: 'filter charts (regex)', 'aria-label': 'Filter charts', 'data-testid': 'chart-filter', size: 22 });
  private readonly shown = new Map<string, Shown>();
  private runsKey = '';
  /** The chart the next render starts with, so every chart gets its turn. */
  private cursor = 0;
  private chooserSignature = '';
  private options: ChartOptions = { axis: 'step', smoothing: { kind: 'none' }, hidden: [], logCharts: [], chartFilter: '' };

  constructor(private readonly hooks: MetricsHooks) {
    const resetAll = h('button', { title: 'Show whole runs on every chart' }, 'Reset zoom');
    resetAll.addEventListener('click', () => this.shown.forEach((s) => s.chart.resetZoom()));
    this.axisSelect.addEventListener('change', () => hooks.changeOptions({ axis: this.axisSelect.value as XAxis }));
    const smoothing = (): void => hooks.changeOptions({ smoothing: this.readSmoothing() });
    this.smoothingSelect.addEventListener('change', smoothing);
    this.strength.addEventListener('input', smoothing);
    this.filter.addEventListener('input', () => hooks.changeOptions({ chartFilter: this.filter.value }));
    this.element.append(
      h('div', { class: 'toolbar' }, this.filter, h('label', {}, 'X axis ', this.axisSelect), this.smoothingSelect, this.strength, resetAll),
      this.chooser,
      this.empty,
      this.grid,
    );
  }

  /**
   * Bring the charts up to date, spending at most about one frame's budget: charts that did
   * not get their turn are drawn on the next call, starting where this one stopped.
   * Returns whether some chart still waits.
   *
   * Args: `runs` the selected run first, then the runs compared with it.
   */
  render(runs: readonly ChartRun[], options: ChartOptions): boolean {
    const runsKey = runs.map((r) => `${r.key}=${r.color ?? ''}`).join('\u0001');
    if (runsKey !== this.runsKey) {
      this.clear();
      this.runsKey = runsKey;
    }
    this.options = options;
    this.axisSelect.value = options.axis;
    this.smoothingSelect.value = options.smoothing.kind;
    this.strength.hidden = options.smoothing.kind === 'none';
    if (options.smoothing.kind === 'ema') this.strength.value = String(Math.round(options.smoothing.weight * 100));
    if (options.smoothing.kind === 'mean') this.strength.value = String(options.smoothing.window);
    const names = chartOrder(runs.flatMap((r) => [...chartGroups(Object.keys(r.run.series)).keys()]));
    this.renderChooser(names, options.hidden);
    this.empty.hidden = names.length > 0 || runs.length === 0;
    this.empty.textContent = 'No metrics yet: the charts fill as the run reports its first steps.';
    if (document.activeElement !== this.filter) this.filter.value = options.chartFilter;
    const ticked = names.filter((k) => !options.hidden.includes(k));
    for (const name of [...this.shown.keys()]) if (!ticked.includes(name)) this.remove(name);
    // Filtered-out charts are only hidden: typing in the filter must stay instant.
    const visible = ticked.filter((k) => matchesFilter(k, options.chartFilter));
    for (const [name, shown] of this.shown) {
      const hidden = !visible.includes(name);
      if (hidden && !shown.card.hidden) shown.drawn = '';
      shown.card.hidden = hidden;
    }
    if (runs.length === 0) return false;
    const markers = runs.flatMap((r, i) => markersOf(r, runs.length > 1, i === 0, options.axis));
    const optionKey = JSON.stringify([options.axis, options.smoothing, runs.map((r) => [r.run.epochStarts.length, r.run.alerts.length]), markers.map((m) => [m.step, m.label])]);
    const started = performance.now();
    for (let i = 0; i < visible.length; i++) {
      const name = visible[(this.cursor + i) % visible.length];
      const log = options.logCharts.includes(name);
      const shown = this.shown.get(name) ?? this.add(name, ticked);
      const series = chartSeries(name, runs, options.axis);
      const drawn = `${series.map((s) => `${s.id}@${s.data.rev}`).join(',')}|${optionKey}|${log}`;
      if (shown.drawn === drawn) continue;
      if (performance.now() - started > FRAME_BUDGET_MS) {
        this.cursor = (this.cursor + i) % visible.length;
        return true;
      }
      shown.drawn = drawn;
      shown.log.checked = log;
      fill(shown.legend, ...legendOf(series));
      shown.chart.update({ series, axis: options.axis, yLabel: axisTitle(name), smoothing: options.smoothing, markers, log });
    }
    return false;
  }

  private readSmoothing(): Smoothing {
    const value = Number(this.strength.value);
    switch (this.smoothingSelect.value) {
      case 'ema':
        return { kind: 'ema', weight: Math.min(0.99, value / 100) };
      case 'mean':
        return { kind: 'mean', window: Math.max(1, Math.round(value)) };
      default:
        return { kind: 'none' };
    }
  }

  private renderChooser(keys: string[], hidden: string[]): void {
    const signature = JSON.stringify([keys, hidden]);
    if (signature === this.chooserSignature) return;
    this.chooserSignature = signature;
    fill(
      this.chooser,
      ...keys.map((key) => {
        const box = h('input', { type: 'checkbox', checked: !hidden.includes(key), 'data-metric': key });
        box.addEventListener('change', () => {
          const rest = this.options.hidden.filter((k) => k !== key);
          this.hooks.changeOptions({ hidden: box.checked ? rest : [...rest, key] });
        });
        return h('label', { class: 'metric-choice' }, box, key);
      }),
    );
  }

  /** A new chart card, placed where `order` puts it among the cards already shown. */
  private add(key: string, order: string[]): Shown {
    const legend = h('span', { class: 'legend' });
    const log = h('input', { type: 'checkbox', 'data-testid': 'log-scale', title: 'Logarithmic y axis' });
    const exportButton = h('button', { class: 'small', title: 'Save this chart as PNG (with its legend)' }, 'PNG');
    const resetButton = h('button', { class: 'small', title: 'Show the whole run' }, 'Reset');
    const body = h('div', { class: 'chart-body' });
    const card = h(
      'figure',
      { class: 'chart', 'data-testid': 'chart', 'data-metric': key },
      h('figcaption', {}, h('span', { class: 'chart-title' }, key), legend, h('label', { class: 'log-toggle muted' }, log, 'log'), resetButton, exportButton),
      body,
    );
    const after = order.slice(order.indexOf(key) + 1).map((k) => this.shown.get(k)?.card).find(Boolean);
    this.grid.insertBefore(card, after ?? null);
    const chart = new MetricChart(body, key, this.hooks.history);
    exportButton.addEventListener('click', () => this.hooks.savePng(`${key.replace(/[^\w.-]+/g, '_')}.png`, chart.png()));
    resetButton.addEventListener('click', () => chart.resetZoom());
    log.addEventListener('change', () => {
      const rest = this.options.logCharts.filter((k) => k !== key);
      this.hooks.changeOptions({ logCharts: log.checked ? [...rest, key] : rest });
    });
    const shown = { chart, card, legend, log, drawn: '' };
    this.shown.set(key, shown);
    return shown;
  }

  private remove(key: string): void {
    const shown = this.shown.get(key);
    if (!shown) return;
    shown.chart.destroy();
    shown.card.remove();
    this.shown.delete(key);
  }

  private clear(): void {
    for (const key of [...this.shown.keys()]) this.remove(key);
    this.chooserSignature = '';
  }
}

/** The legend of a chart: one entry per series, in its colour and line style. */
function legendOf(series: readonly ChartSeries[]): HTMLElement[] {
  if (series.length < 2) return [];
  return series.map((s) => {
    const shape = s.style === 'points' ? 'points' : s.dash ? 'dashed' : 'line';
    const entry = h('span', { class: `legend-entry legend-${shape}`, 'data-series': s.id }, s.label);
    entry.style.color = s.color;
    return entry;
  });
}

/** A run's markers: its hyperparameter changes and alerts (named by run when compared). */
function markersOf(run: ChartRun, compared: boolean, primary: boolean, axis: XAxis): Marker[] {
  const last = run.run.info.step;
  const map = axisFor(axis, run.run.epochStarts, last);
  const prefix = compared ? `${run.label}: ` : '';
  const own = [...hparamMarkers(run.run.hparams), ...alertMarkers(run.run.alerts)];
  // Compared runs show their alerts; hyperparameter changes only of the selected run.
  const shown = primary ? own : own.filter((m) => m.kind !== 'hparam');
  return shown.map((m) => ({ ...m, label: `${prefix}${m.label}`, map }));
}
