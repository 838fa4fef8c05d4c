/**
 * The metric charts of the selected run: a chooser listing every metric, one chart per
 * chosen metric with its splits overlaid (`loss`, `val/loss` and `test/loss` on one chart),
 * hyperparameter changes as markers, and the shared options (x axis in steps or epochs,
 * smoothing).
 */
import type { Points } from '../../common/decimate';
import { chartGroups, parseSeriesKey } from '../../common/series';
import type { RunView } from '../../common/state';
import type { XAxis } from '../axis';
import { MetricChart, type ChartSeries, type FetchHistory } from '../charts';
import { fill, h } from '../dom';
import { hparamMarkers } from '../markers';
import type { Smoothing } from '../smoothing';

export interface ChartOptions {
  axis: XAxis;
  smoothing: Smoothing;
  /** Charts (metric names) the reader unticked. */
  hidden: string[];
}

export interface MetricsHooks {
  history: FetchHistory;
  savePng(name: string, dataUrl: string): void;
  changeOptions(options: Partial<ChartOptions>): void;
}

/** The series of a `history` reply (`{run, split, metric, series: {steps, values, decimated}}`). */
export function historyPoints(data: Record<string, unknown>): Points | null {
  const series = data.series;
  if (typeof series !== 'object' || series === null) return null;
  const { steps, values } = series as { steps?: unknown; values?: unknown };
  if (!Array.isArray(steps) || !Array.isArray(values) || steps.length !== values.length) return null;
  return { steps: steps as number[], values: values as (number | null)[] };
}

/** Chart drawing per frame, so input is never kept waiting behind a round of redraws. */
const FRAME_BUDGET_MS = 8;

interface Shown {
  chart: MetricChart;
  card: HTMLElement;
  legend: HTMLElement;
  /** The series revisions and options last drawn. */
  drawn: string;
}

export class MetricsPanel {
  readonly element = h('section', { class: 'metrics', 'aria-label': 'Metrics' });
  private readonly chooser = h('div', { class: 'chooser' });
  private readonly grid = h('div', { class: 'charts' });
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
  private readonly shown = new Map<string, Shown>();
  private runKey = '';
  /** The chart the next render starts with, so every chart gets its turn. */
  private cursor = 0;
  private chooserSignature = '';
  private options: ChartOptions = { axis: 'step', smoothing: { kind: 'none' }, hidden: [] };

  constructor(private readonly hooks: MetricsHooks) {
    const resetAll = h('button', { title: 'Show whole runs on every chart' }, 'Reset zoom');
    resetAll.addEventListener('click', () => this.shown.forEach((s) => s.chart.resetZoom()));
    this.axisSelect.addEventListener('change', () => hooks.changeOptions({ axis: this.axisSelect.value as XAxis }));
    const smoothing = (): void => hooks.changeOptions({ smoothing: this.readSmoothing() });
    this.smoothingSelect.addEventListener('change', smoothing);
    this.strength.addEventListener('input', smoothing);
    this.element.append(
      h('div', { class: 'toolbar' }, h('label', {}, 'X axis ', this.axisSelect), this.smoothingSelect, this.strength, resetAll),
      this.chooser,
      this.grid,
    );
  }

  /**
   * Bring the charts up to date, spending at most about one frame's budget: charts that did
   * not get their turn are drawn on the next call, starting where this one stopped.
   * Returns whether some chart still waits.
   */
  render(runKey: string, run: RunView | null, options: ChartOptions): boolean {
    if (runKey !== this.runKey) {
      this.clear();
      this.runKey = runKey;
    }
    this.options = options;
    this.axisSelect.value = options.axis;
    this.smoothingSelect.value = options.smoothing.kind;
    this.strength.hidden = options.smoothing.kind === 'none';
    if (options.smoothing.kind === 'ema') this.strength.value = String(Math.round(options.smoothing.weight * 100));
    if (options.smoothing.kind === 'mean') this.strength.value = String(options.smoothing.window);
    const groups = chartGroups(run ? Object.keys(run.series) : []);
    const names = [...groups.keys()];
    this.renderChooser(names, options.hidden);
    if (!run) return false;
    const visible = names.filter((k) => !options.hidden.includes(k));
    for (const name of [...this.shown.keys()]) if (!visible.includes(name)) this.remove(name);
    const markers = hparamMarkers(run.hparams);
    const optionKey = JSON.stringify([options.axis, options.smoothing, run.epochStarts.length, markers]);
    const started = performance.now();
    for (let i = 0; i < visible.length; i++) {
      const name = visible[(this.cursor + i) % visible.length];
      const keys = groups.get(name) ?? [];
      const series: ChartSeries[] = keys.map((key) => ({ key, split: parseSeriesKey(key).split, data: run.series[key] }));
      const shown = this.shown.get(name) ?? this.add(name);
      const drawn = `${keys.map((k) => `${k}@${run.series[k].rev}`).join(',')}|${optionKey}`;
      if (shown.drawn === drawn) continue;
      if (performance.now() - started > FRAME_BUDGET_MS) {
        this.cursor = (this.cursor + i) % visible.length;
        return true;
      }
      shown.drawn = drawn;
      fill(shown.legend, ...(series.length > 1 ? series.map((s) => h('span', { class: `legend-${s.split}` }, s.split)) : []));
      shown.chart.update({ series, epochStarts: run.epochStarts, axis: options.axis, smoothing: options.smoothing, markers });
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
    if (keys.length === 0) {
      fill(this.chooser, h('span', { class: 'muted' }, 'No metrics streamed yet.'));
      return;
    }
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

  private add(key: string): Shown {
    const title = key;
    const legend = h('span', { class: 'legend' });
    const exportButton = h('button', { class: 'small', title: 'Save this chart as PNG' }, 'PNG');
    const resetButton = h('button', { class: 'small', title: 'Show the whole run' }, 'Reset');
    const body = h('div', { class: 'chart-body' });
    const card = h(
      'figure',
      { class: 'chart', 'data-testid': 'chart', 'data-metric': key },
      h('figcaption', {}, h('span', { class: 'chart-title' }, title), legend, resetButton, exportButton),
      body,
    );
    this.grid.append(card);
    const chart = new MetricChart(body, title, this.hooks.history);
    exportButton.addEventListener('click', () => this.hooks.savePng(`${key.replace(/[^\w.-]+/g, '_')}.png`, chart.png()));
    resetButton.addEventListener('click', () => chart.resetZoom());
    const shown = { chart, card, legend, drawn: '' };
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
