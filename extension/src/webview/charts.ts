/**
 * One uPlot chart of one metric: its splits (train as a line, validation as a dashed line
 * with points, test as points), for one run or for every run compared (one colour per run),
 * with an optional smoothed line over each train series, a linear or log y axis, axis titles,
 * a hover readout (every series' value at the cursor, with the step, epoch and wall time) and
 * markers: hyperparameter changes, alerts, and every NaN or infinite value where it occurs.
 *
 * What it draws of a train series: the dashboard's copy (possibly decimated), with, while
 * zoomed, the server's full-resolution `history` of the visible range spliced in, plus every
 * streamed point newer than that history, so the newest point is always on screen. The visible
 * range is then min/max-decimated to about two points per pixel (see `chartModel.ts`), which
 * keeps a million-point series fast to draw.
 *
 * Zoom: drag to select, wheel to zoom around the cursor; pan: shift+drag; double-click or
 * `resetZoom()` goes back to following the whole run. The readout (`chartReadout.ts`), the
 * markers (`chartMarkers.ts`) and the PNG export (`chartImage.ts`) live beside it.
 */
import uPlot from 'uplot';
import { lowerBound, upperBound, type Points } from '../common/decimate';
import type { SeriesData } from '../common/series';
import type { XAxis } from './axis';
import { chartImage, type LegendEntry } from './chartImage';
import { ChartMarkers, type Marker } from './chartMarkers';
import { compose, type ChartSeries, type Composed, type XRange } from './chartModel';
import { showReadout } from './chartReadout';
import { cssValue } from './dom';
import { withAlpha } from './palette';
import { cssRgb } from './scatter';
import type { Smoothing } from './smoothing';
import { linearTickLabels, logTickLabels } from './ticks';

export type { ChartSeries } from './chartModel';
export type { Marker } from './chartMarkers';

export interface ChartInput {
  /** The first dense series is the primary one: the readout's step, epoch and time are its. */
  series: ChartSeries[];
  axis: XAxis;
  /** The y axis title (the metric). */
  yLabel: string;
  smoothing: Smoothing;
  markers: Marker[];
  log: boolean;
}

/** Fetch the full-resolution points of series `key` of run `runKey` with `start <= step <= end`. */
export type FetchHistory = (runKey: string, key: string, start: number, end: number, maxPoints: number) => Promise<Points | null>;

/** A fetched full-resolution window of a series (steps `lo..hi`). */
export interface Detail {
  lo: number;
  hi: number;
  points: Points;
}

const HEIGHT = 240;
const HISTORY_DELAY_MS = 150;
/** The wire's limit on `max_points`. */
const MAX_HISTORY_POINTS = 1_000_000;
/** Name of the performance measure of each draw (data in, pixels out). */
export const DRAW_MEASURE = 'onthefly:chart-draw';

/** uPlot's `values` for both axes: exact linear labels, or the log axis' decades. */
export function tickLabels(u: uPlot, splits: number[], axis: number, _space: number, increment: number): string[] {
  const scale = u.scales[axis === 0 ? 'x' : 'y'];
  if (scale?.distr === 3) return logTickLabels(splits, scale.min ?? 0, scale.max ?? 0);
  return linearTickLabels(splits, increment);
}

/** Room for the longest y label, so long labels are never cut. */
function axisWidth(u: uPlot, values: string[] | null): number {
  if (!values?.length) return 40;
  u.ctx.font = `${12 * devicePixelRatio}px sans-serif`;
  const widest = Math.max(...values.map((v) => u.ctx.measureText(v).width)) / devicePixelRatio;
  return Math.ceil(widest) + 14;
}


export class MetricChart {
  readonly element: HTMLElement;
  private plot: uPlot | null = null;
  private signature = '';
  private input: ChartInput | null = null;
  private composed: Composed | null = null;
  /** The zoomed range in x units; `null` follows the whole run. */
  private zoom: XRange | null = null;
  private readonly details = new Map<string, Detail>();
  private fetchTimer: ReturnType<typeof setTimeout> | null = null;
  private fetchToken = 0;
  private drawStart = 0;
  private draws = 0;
  private pan: { x: number; lo: number; hi: number } | null = null;
  private readonly resize: ResizeObserver;
  private readonly markers = new ChartMarkers();
  private readonly readout = document.createElement('div');

  constructor(
    parent: HTMLElement,
    readonly title: string,
    private readonly fetchHistory: FetchHistory,
  ) {
    this.element = document.createElement('div');
    this.element.className = 'chart-plot';
    parent.append(this.element);
    this.readout.className = 'chart-readout';
    this.readout.dataset.testid = 'readout';
    this.readout.hidden = true;
    // A new width redraws what is drawn (uPlot's own, cheap); the next update decimates for
    // it. Composing again here would run once per chart shown, all in one frame (a filter
    // that brings back several charts at once).
    this.resize = new ResizeObserver(() => {
      const width = Math.max(200, this.element.clientWidth);
      if (this.plot && width !== this.plot.width) this.plot.setSize({ width, height: HEIGHT });
    });
    this.resize.observe(this.element);
  }

  get isZoomed(): boolean {
    return this.zoom !== null;
  }

  update(input: ChartInput): void {
    this.input = input;
    this.redraw();
  }

  /** Zoom to x values `[lo, hi]` (steps or epochs) and fetch their full resolution. */
  zoomTo(lo: number, hi: number): void {
    if (!(hi > lo)) return;
    this.zoom = { lo, hi };
    this.redraw();
    this.scheduleHistory();
  }

  resetZoom(): void {
    this.zoom = null;
    this.details.clear();
    this.fetchToken++;
    this.redraw();
  }

  /** The chart as a PNG data URL: its title and legend, the plot with its axes and markers. */
  png(): string {
    if (!this.plot) throw new Error('the chart has nothing drawn yet');
    return chartImage(this.plot, this.title, this.legendEntries(), this.markers);
  }

  destroy(): void {
    if (this.fetchTimer) clearTimeout(this.fetchTimer);
    this.fetchToken++;
    this.resize.disconnect();
    this.plot?.destroy();
    this.element.remove();
  }

  // ------------------------------------------------------------------------------ drawing

  private redraw(): void {
    const input = this.input;
    if (!input || input.series.length === 0) return;
    this.ensurePlot(input);
    // Measured from here: data in, pixels out (not the plot's construction and first layout).
    this.drawStart = performance.now();
    const plot = this.plot as uPlot;
    const budget = Math.max(64, 2 * plot.width);
    const inputs = input.series.map((series) => ({ series, points: this.pointsOf(series) }));
    const composed = compose(inputs, this.zoom, budget, input.smoothing, input.log);
    this.composed = composed;
    const primary = composed.drawn.find((d) => d.series.dense) ?? composed.drawn[0];
    const detail = primary ? this.details.get(primary.series.id) : undefined;
    // What is on screen, readable by tests and tools without reaching into the chart.
    Object.assign(this.element.dataset, {
      points: String(primary?.steps.length ?? 0),
      first: String(primary?.steps[0] ?? ''),
      last: String(primary?.steps.at(-1) ?? ''),
      detail: detail ? String(detail.points.steps.length) : '',
      splits: [...new Set(input.series.map((s) => s.split))].join(' '),
      series: String(input.series.length),
      runs: String(new Set(input.series.map((s) => s.runKey)).size),
      log: String(input.log),
      nonfinite: String(composed.nonFinite.length),
      xTitle: input.axis === 'epoch' ? 'epoch' : 'step',
      yTitle: input.log ? `${input.yLabel} (log scale)` : input.yLabel,
    });
    this.markers.set(input.markers, composed, input.series[0]?.map);
    const data = composed.aligned as uPlot.AlignedData;
    if (this.zoom) {
      const { lo, hi } = this.zoom;
      plot.batch(() => {
        plot.setData(data, false);
        plot.setScale('x', { min: lo, max: hi });
      });
    } else {
      plot.setData(data, true);
    }
  }

  /** A new uPlot when the series, their styles or the scale changed; the same one otherwise. */
  private ensurePlot(input: ChartInput): void {
    const smoothed = input.smoothing.kind !== 'none';
    const signature = JSON.stringify([
      input.series.map((s) => [s.id, s.color, s.style, s.dash, s.dense]),
      smoothed,
      input.log,
      input.axis,
      input.yLabel,
    ]);
    if (signature === this.signature && this.plot) return;
    this.signature = signature;
    this.plot?.destroy();
    const axisStroke = cssValue('--otf-fg', '#ccc');
    // Gridlines in the text colour, faint: readable on dark and light themes alike.
    const [r, g, b] = cssRgb(axisStroke, [204, 204, 204]);
    const grid = { stroke: `rgba(${r}, ${g}, ${b}, 0.15)`, width: 1 };
    const axis = { stroke: axisStroke, grid, ticks: { show: false }, values: tickLabels, labelSize: 14, labelGap: 0, labelFont: '12px sans-serif' };
    const series: uPlot.Series[] = [{}];
    for (const s of input.series) {
      const faint = s.dense && smoothed;
      series.push(seriesOptions(s, faint));
      if (faint) series.push({ label: `${s.label} (smoothed)`, stroke: s.color, width: 2, points: { show: false } });
    }
    this.plot = new uPlot(
      {
        width: Math.max(200, this.element.clientWidth || 600),
        height: HEIGHT,
        legend: { show: false },
        scales: { x: { time: false }, y: input.log ? { distr: 3, log: 10 } : {} },
        axes: [
          { ...axis, size: 24, label: input.axis === 'epoch' ? 'epoch' : 'step' },
          { ...axis, size: axisWidth, label: input.log ? `${input.yLabel} (log scale)` : input.yLabel },
        ],
        series,
        cursor: {
          drag: { x: true, y: false, setScale: false },
          bind: {
            dblclick: () => () => {
              this.resetZoom();
              return null;
            },
            // uPlot ignores moves over its children: over a marker the readout must go on.
            mousemove: (_u, _target, handler) => (event) => {
              handler(event);
              return null;
            },
            mousedown: (_u, _target, handler) => (event) => {
              if (!event.shiftKey) return handler(event);
              this.startPan(event);
              return null;
            },
          },
        },
        hooks: {
          setSelect: [(u) => this.selected(u)],
          setCursor: [(u) => showReadout(this.readout, u, this.composed)],
          draw: [() => this.measureDraw(), (u) => this.markers.place(u)],
        },
      },
      [[]],
      this.element,
    );
    this.plot.over.addEventListener('wheel', (event) => this.wheel(event), { passive: false });
    this.plot.over.addEventListener('mouseleave', () => (this.readout.hidden = true));
    this.plot.over.append(this.markers.layer, this.readout);
  }

  /** The points of a series: a dense one with the fetched full-resolution window spliced in. */
  private pointsOf(series: ChartSeries): Points {
    const detail = this.details.get(series.id);
    if (!detail || !this.zoom) return series.data;
    return splice(series.data, detail);
  }

  // ------------------------------------------------------------------------------ readout

  private legendEntries(): LegendEntry[] {
    return (this.input?.series ?? []).map((s) => ({ label: s.label, color: s.color, dash: s.dash }));
  }

  // ------------------------------------------------------------------------------ zoom

  private scheduleHistory(): void {
    if (this.fetchTimer) clearTimeout(this.fetchTimer);
    this.fetchTimer = setTimeout(() => {
      this.fetchTimer = null;
      const zoom = this.zoom;
      const plot = this.plot;
      if (!zoom || !plot) return;
      const token = ++this.fetchToken;
      const maxPoints = Math.min(MAX_HISTORY_POINTS, Math.max(2, 2 * plot.width));
      for (const series of this.input?.series ?? []) {
        if (!series.dense) continue;
        const lo = Math.floor(series.map.toStep(zoom.lo));
        const hi = Math.ceil(series.map.toStep(zoom.hi));
        void this.fetchHistory(series.runKey, series.key, lo, hi, maxPoints).then((points) => {
          if (token !== this.fetchToken || !points) return;
          this.details.set(series.id, { lo, hi, points });
          this.redraw();
        });
      }
    }, HISTORY_DELAY_MS);
  }

  private selected(u: uPlot): void {
    const { left, width } = u.select;
    if (width < 4) return;
    const lo = u.posToVal(left, 'x');
    const hi = u.posToVal(left + width, 'x');
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    this.zoomTo(lo, hi);
  }

  private visibleX(): XRange {
    const { min, max } = this.plot?.scales.x ?? {};
    return { lo: min ?? 0, hi: max ?? 1 };
  }

  private wheel(event: WheelEvent): void {
    event.preventDefault();
    const plot = this.plot;
    if (!plot) return;
    const { lo, hi } = this.visibleX();
    const at = plot.posToVal(event.offsetX, 'x');
    const factor = event.deltaY > 0 ? 1.25 : 0.8;
    this.zoomTo(at - (at - lo) * factor, at + (hi - at) * factor);
  }

  private startPan(event: MouseEvent): void {
    const { lo, hi } = this.visibleX();
    this.pan = { x: event.clientX, lo, hi };
    const move = (e: MouseEvent): void => {
      if (!this.pan || !this.plot) return;
      const perPixel = (this.pan.hi - this.pan.lo) / Math.max(1, this.plot.bbox.width / devicePixelRatio);
      const shift = (this.pan.x - e.clientX) * perPixel;
      this.zoomTo(this.pan.lo + shift, this.pan.hi + shift);
    };
    const up = (): void => {
      this.pan = null;
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  }

  /** Drawing time, visible to performance tools and the browser tests. */
  private measureDraw(): void {
    // Only draws of data given to redraw() count (not uPlot's own first, empty one).
    if (!this.drawStart) return;
    performance.measure(DRAW_MEASURE, { start: this.drawStart, end: performance.now() });
    this.drawStart = 0;
    // The timeline keeps every entry; observers have seen them by now, so keep it small.
    if (++this.draws % 200 === 0) performance.clearMeasures(DRAW_MEASURE);
  }
}

/** uPlot's options of one series, by its style. */
function seriesOptions(s: ChartSeries, faint: boolean): uPlot.Series {
  const stroke = faint ? withAlpha(s.color, 0.35) : s.color;
  switch (s.style) {
    case 'points':
      return { label: s.label, stroke, paths: () => null, points: { show: true, size: 7, fill: s.color } };
    case 'line+points':
      return { label: s.label, stroke, width: 1.5, dash: s.dash, points: { show: true, size: 5, fill: s.color } };
    default:
      return { label: s.label, stroke, width: faint ? 1 : 1.5, dash: s.dash, points: { show: false } };
  }
}

/** The local series with a fetched full-resolution window spliced in. */
export function splice(series: SeriesData | Points, detail: Detail): Points {
  const { steps, values } = series;
  const before = lowerBound(steps, detail.lo);
  const after = upperBound(steps, Math.max(detail.hi, detail.points.steps.at(-1) ?? detail.hi));
  return {
    steps: steps.slice(0, before).concat(detail.points.steps, steps.slice(after)),
    values: values.slice(0, before).concat(detail.points.values, values.slice(after)),
  };
}
