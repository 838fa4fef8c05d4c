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
 * `resetZoom()` goes back to following the whole run.
 */
import uPlot from 'uplot';
import { lowerBound, upperBound, type Points } from '../common/decimate';
import type { SeriesData } from '../common/series';
import type { AxisMap, XAxis } from './axis';
import { STEP_AXIS } from './axis';
import { compose, nearestIndex, type ChartSeries, type Composed, type Drawn, type XRange } from './chartModel';
import { formatWallTime, timeAt } from './clock';
import { formatNumber } from './dom';
import { withAlpha } from './palette';
import { cssRgb } from './scatter';
import type { Smoothing } from './smoothing';
import { linearTickLabels, logTickLabels } from './ticks';

export type { ChartSeries } from './chartModel';

/** A vertical line at a step, e.g. a hyperparameter change or an alert; `label` is its tooltip. */
export interface Marker {
  step: number;
  label: string;
  kind: 'hparam' | 'error' | 'warning';
  /** The x mapping of the run the marker belongs to (default: the chart's first series'). */
  map?: AxisMap;
}

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

function css(name: string, fallback: string): string {
  return getComputedStyle(document.body).getPropertyValue(name).trim() || fallback;
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
  private readonly markerLayer = document.createElement('div');
  private readonly readout = document.createElement('div');
  private markerSignature = '';

  constructor(
    parent: HTMLElement,
    readonly title: string,
    private readonly fetchHistory: FetchHistory,
  ) {
    this.element = document.createElement('div');
    this.element.className = 'chart-plot';
    parent.append(this.element);
    this.markerLayer.className = 'markers';
    this.readout.className = 'chart-readout';
    this.readout.dataset.testid = 'readout';
    this.readout.hidden = true;
    this.resize = new ResizeObserver(() => {
      const width = Math.max(200, this.element.clientWidth);
      if (this.plot && width !== this.plot.width) {
        this.plot.setSize({ width, height: HEIGHT });
        this.redraw();
      }
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
    const plot = this.plot;
    if (!plot) throw new Error('the chart has nothing drawn yet');
    const dpr = devicePixelRatio;
    const source = plot.ctx.canvas;
    const legend = this.legendEntries();
    const lineHeight = 18 * dpr;
    const head = 28 * dpr + Math.ceil(legend.length / 4) * lineHeight;
    const canvas = document.createElement('canvas');
    canvas.width = source.width;
    canvas.height = source.height + head;
    const ctx = canvas.getContext('2d');
    if (!ctx) throw new Error('this browser cannot draw on a canvas');
    ctx.fillStyle = css('--otf-bg', '#1e1e1e');
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = css('--otf-fg', '#ccc');
    ctx.font = `${14 * dpr}px sans-serif`;
    ctx.fillText(this.title, 8 * dpr, 19 * dpr);
    ctx.font = `${12 * dpr}px sans-serif`;
    const column = canvas.width / 4;
    legend.forEach(({ label, color, dash }, i) => {
      const x = 8 * dpr + (i % 4) * column;
      const y = 28 * dpr + Math.floor(i / 4) * lineHeight + 10 * dpr;
      ctx.strokeStyle = color;
      ctx.lineWidth = 2 * dpr;
      ctx.setLineDash(dash ? dash.map((d) => d * dpr) : []);
      ctx.beginPath();
      ctx.moveTo(x, y);
      ctx.lineTo(x + 18 * dpr, y);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = css('--otf-fg', '#ccc');
      ctx.fillText(label, x + 24 * dpr, y + 4 * dpr);
    });
    ctx.drawImage(source, 0, head);
    this.drawMarkersOn(ctx, head);
    return canvas.toDataURL('image/png');
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
    this.drawStart = performance.now();
    this.ensurePlot(input);
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
    this.setMarkers(input.markers, composed);
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
    const axisStroke = css('--otf-fg', '#ccc');
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
          setCursor: [(u) => this.showReadout(u)],
          draw: [() => this.measureDraw(), () => this.placeMarkers()],
        },
      },
      [[]],
      this.element,
    );
    this.plot.over.addEventListener('wheel', (event) => this.wheel(event), { passive: false });
    this.plot.over.addEventListener('mouseleave', () => (this.readout.hidden = true));
    this.plot.over.append(this.markerLayer, this.readout);
  }

  /** The points of a series: a dense one with the fetched full-resolution window spliced in. */
  private pointsOf(series: ChartSeries): Points {
    const detail = this.details.get(series.id);
    if (!detail || !this.zoom) return series.data;
    return splice(series.data, detail);
  }

  // ------------------------------------------------------------------------------ readout

  private showReadout(u: uPlot): void {
    const left = u.cursor.left ?? -1;
    const composed = this.composed;
    if (left < 0 || !composed || composed.drawn.length === 0) {
      this.readout.hidden = true;
      return;
    }
    const x = u.posToVal(left, 'x');
    const primary = composed.drawn.find((d) => d.series.dense) ?? composed.drawn[0];
    const at = nearestIndex(primary.x, x);
    if (at < 0) {
      this.readout.hidden = true;
      return;
    }
    const series = primary.series;
    // The step under the cursor: the primary run's nearest point while over its range (other
    // runs compared may go further, and are read at the cursor too).
    const inside = x <= (primary.x.at(-1) ?? x) + 1e-9;
    const step = inside ? primary.steps[at] : Math.max(0, Math.round(series.map.toStep(x)));
    const epoch = Math.max(0, upperBound(series.epochStarts as number[], step) - 1);
    const time = series.clock && inside ? timeAt(series.clock, step) : null;
    const head = [`step ${step}`, series.epochStarts.length && inside ? `epoch ${epoch}` : '', time !== null ? formatWallTime(time, series.startedAt) : '']
      .filter(Boolean)
      .join(' · ');
    const rows = composed.drawn.map((d) => readoutRow(d, x, step));
    this.readout.replaceChildren(el('div', 'readout-head', head), ...rows.map((r) => r.element));
    this.readout.dataset.step = String(step);
    this.readout.dataset.values = JSON.stringify(rows.map((r) => [r.label, r.value]));
    this.readout.hidden = false;
    // Beside the cursor, on the side with room.
    const width = u.over.clientWidth;
    const box = this.readout.offsetWidth || 180;
    this.readout.style.left = `${left + 14 + box > width ? Math.max(0, left - 14 - box) : left + 14}px`;
  }

  private legendEntries(): { label: string; color: string; dash?: number[] }[] {
    return (this.input?.series ?? []).map((s) => ({ label: s.label, color: s.color, dash: s.dash }));
  }

  // ------------------------------------------------------------------------------ markers

  private setMarkers(markers: Marker[], composed: Composed): void {
    const nonFinite = composed.nonFinite.map((n) => ({
      x: n.x,
      label: `${n.series.label}: NaN or infinite at step ${n.step}`,
      kind: 'nonfinite',
    }));
    const primaryMap = this.input?.series[0]?.map ?? STEP_AXIS;
    const lines = markers.map((m) => ({ x: (m.map ?? primaryMap).toX(m.step), label: m.label, kind: m.kind }));
    const all = [...lines, ...nonFinite];
    const signature = JSON.stringify(all);
    if (signature === this.markerSignature) return;
    this.markerSignature = signature;
    this.markerLayer.replaceChildren(
      ...all.map((m) => {
        const el = document.createElement('div');
        el.className = `marker marker-${m.kind}`;
        el.title = m.label;
        el.dataset.testid = m.kind === 'nonfinite' ? 'nonfinite' : 'marker';
        el.dataset.kind = m.kind;
        el.dataset.x = String(m.x);
        el.setAttribute('aria-label', m.label);
        return el;
      }),
    );
  }

  /** Markers follow the x scale after every draw (zoom, pan, resize, new data). */
  private placeMarkers(): void {
    const plot = this.plot;
    if (!plot) return;
    const width = plot.over.clientWidth;
    for (const el of this.markerLayer.children as HTMLCollectionOf<HTMLElement>) {
      const left = plot.valToPos(Number(el.dataset.x), 'x');
      el.hidden = !(left >= 0 && left <= width);
      el.style.left = `${left}px`;
    }
  }

  /** The markers, drawn into an exported image (the DOM ones are not on the canvas). */
  private drawMarkersOn(ctx: CanvasRenderingContext2D, top: number): void {
    const plot = this.plot;
    if (!plot) return;
    const dpr = devicePixelRatio;
    const colors: Record<string, string> = {
      hparam: css('--otf-marker', '#CC79A7'),
      error: css('--otf-error', '#D55E00'),
      warning: '#E69F00',
      nonfinite: css('--otf-error', '#D55E00'),
    };
    const { top: plotTop, height } = plot.bbox;
    for (const el of this.markerLayer.children as HTMLCollectionOf<HTMLElement>) {
      if (el.hidden) continue;
      const x = plot.valToPos(Number(el.dataset.x), 'x', true); // canvas pixels, plot offset included
      const kind = el.dataset.kind ?? 'hparam';
      ctx.strokeStyle = ctx.fillStyle = colors[kind] ?? colors.hparam;
      if (kind === 'nonfinite') {
        const y = top + plotTop + height;
        ctx.beginPath();
        ctx.moveTo(x, y - 9 * dpr);
        ctx.lineTo(x - 5 * dpr, y);
        ctx.lineTo(x + 5 * dpr, y);
        ctx.fill();
        continue;
      }
      ctx.lineWidth = dpr;
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(x, top + plotTop);
      ctx.lineTo(x, top + plotTop + height);
      ctx.stroke();
      ctx.setLineDash([]);
    }
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

interface ReadoutRow {
  label: string;
  value: number | null;
  element: HTMLElement;
}

/** One series' line of the readout: its nearest point to the cursor (and its step, if not the head's). */
function readoutRow(d: Drawn, x: number, headStep: number): ReadoutRow {
  const i = nearestIndex(d.x, x);
  const value = i < 0 ? null : d.values[i];
  const step = i < 0 ? null : d.steps[i];
  const shown = i < 0 ? '–' : value === null ? 'NaN/∞' : formatNumber(value, 5);
  const swatch = el('span', 'swatch', '');
  swatch.style.background = d.series.color;
  const row = el('div', 'readout-row');
  row.append(swatch, el('span', 'readout-label', d.series.label), el('span', 'readout-value', shown));
  if (step !== null && step !== headStep) row.append(el('span', 'readout-step muted', `@ ${step}`));
  return { label: d.series.label, value: i < 0 ? null : value, element: row };
}

function el(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
