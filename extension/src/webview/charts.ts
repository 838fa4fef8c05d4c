/**
 * One uPlot chart of one metric, its splits overlaid: the train series as a line (with an
 * optional smoothed line), validation as a line with points, test results as points.
 * What it draws of the dense (first) series: the dashboard's copy (possibly decimated),
 * with, while zoomed, the server's full-resolution `history` of the visible range spliced
 * in, plus every streamed point newer than that history, so the newest point is always on
 * screen. The visible range is then min/max-decimated to about two points per pixel, which
 * keeps a million-point series fast to draw. Markers (hyperparameter changes) are vertical
 * lines with a tooltip.
 *
 * Zoom: drag to select, wheel to zoom around the cursor; pan: shift+drag; double-click or
 * `resetZoom()` goes back to following the whole run.
 */
import uPlot from 'uplot';
import { decimate, lowerBound, upperBound, type Points } from '../common/decimate';
import type { SeriesData, Split } from '../common/series';
import { align } from './align';
import { axisFor, type AxisMap, type XAxis } from './axis';
import { smooth, type Smoothing } from './smoothing';

/** One series of a chart: a split of the chart's metric. */
export interface ChartSeries {
  key: string;
  split: Split;
  data: SeriesData;
}

/** A vertical line at a step, e.g. a hyperparameter change; `label` is its tooltip. */
export interface Marker {
  step: number;
  label: string;
}

export interface ChartInput {
  /** In split order; the first one is the dense series zooming fetches the history of. */
  series: ChartSeries[];
  epochStarts: number[];
  axis: XAxis;
  smoothing: Smoothing;
  markers: Marker[];
}

/** Fetch the full-resolution points of series `key` with `start <= step <= end`, at most `maxPoints`. */
export type FetchHistory = (key: string, start: number, end: number, maxPoints: number) => Promise<Points | null>;

interface Detail {
  key: string;
  lo: number;
  hi: number;
  points: Points;
}

/** uPlot series slots after x: the train line, its smoothed line, val, test. */
const SLOTS = { train: 1, smoothed: 2, val: 3, test: 4 } as const;

const HEIGHT = 220;
const HISTORY_DELAY_MS = 150;
/** The wire's limit on `max_points`. */
const MAX_HISTORY_POINTS = 1_000_000;
/** Name of the performance measure of each draw (data in, pixels out). */
export const DRAW_MEASURE = 'onthefly:chart-draw';

/** Tick labels with just enough digits to tell neighbours apart (uPlot's default rounds 1e-4 steps away). */
export function tickLabels(_u: uPlot, splits: number[], _axis: number, _space: number, increment: number): string[] {
  const magnitude = Math.max(...splits.map((v) => Math.abs(v)));
  if (magnitude !== 0 && (magnitude >= 1e6 || magnitude < 1e-3)) {
    const digits = Math.max(0, Math.min(6, Math.ceil(Math.log10(magnitude / increment))));
    return splits.map((v) => (v === 0 ? '0' : v.toExponential(digits)));
  }
  const decimals = Math.max(0, Math.min(12, -Math.floor(Math.log10(increment) + 1e-9)));
  return splits.map((v) => v.toFixed(decimals));
}

/** Room for the longest y label, so long labels are never cut. */
function axisWidth(u: uPlot, values: string[] | null): number {
  if (!values?.length) return 40;
  u.ctx.font = `${12 * devicePixelRatio}px sans-serif`;
  const widest = Math.max(...values.map((v) => u.ctx.measureText(v).width)) / devicePixelRatio;
  return Math.ceil(widest) + 18;
}

export class MetricChart {
  readonly element: HTMLElement;
  private readonly plot: uPlot;
  private input: ChartInput | null = null;
  private map: AxisMap = axisFor('step', [], 0);
  /** The zoomed range in steps; `null` follows the whole run. */
  private zoom: { lo: number; hi: number } | null = null;
  private detail: Detail | null = null;
  private fetchTimer: ReturnType<typeof setTimeout> | null = null;
  private fetchToken = 0;
  private drawStart = 0;
  private draws = 0;
  private pan: { x: number; lo: number; hi: number } | null = null;
  private readonly resize: ResizeObserver;
  private readonly markerLayer = document.createElement('div');
  private markerSignature = '';

  constructor(
    parent: HTMLElement,
    readonly title: string,
    private readonly fetchHistory: FetchHistory,
  ) {
    this.element = document.createElement('div');
    this.element.className = 'chart-plot';
    parent.append(this.element);
    const css = getComputedStyle(document.body);
    const color = (name: string, fallback: string): string => css.getPropertyValue(name).trim() || fallback;
    const line = color('--otf-chart-line', '#3794ff');
    const faint = color('--otf-chart-faint', 'rgba(55,148,255,0.35)');
    const val = color('--otf-chart-val', '#d18616');
    const test = color('--otf-chart-test', '#89d185');
    const grid = { stroke: color('--otf-grid', '#8883'), width: 1 };
    const axis = { stroke: color('--otf-fg', '#ccc'), grid, ticks: { show: false }, values: tickLabels };
    const smoothed = (): boolean => (this.input?.smoothing.kind ?? 'none') !== 'none';
    this.plot = new uPlot(
      {
        width: Math.max(200, parent.clientWidth || 600),
        height: HEIGHT,
        legend: { show: false },
        scales: { x: { time: false } },
        axes: [axis, { ...axis, size: axisWidth }],
        series: [
          {},
          { label: 'train', stroke: () => (smoothed() ? faint : line), width: 1, points: { show: false } },
          { label: 'smoothed', stroke: line, width: 2, points: { show: false } },
          { label: 'val', stroke: val, width: 1.5, points: { show: true, size: 5, fill: val } },
          { label: 'test', stroke: test, paths: () => null, points: { show: true, size: 7, fill: test } },
        ],
        cursor: {
          drag: { x: true, y: false, setScale: false },
          bind: {
            dblclick: () => () => {
              this.resetZoom();
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
          draw: [() => this.measureDraw(), () => this.placeMarkers()],
        },
      },
      [[], [], [], [], []],
      this.element,
    );
    this.plot.over.addEventListener('wheel', (event) => this.wheel(event), { passive: false });
    this.markerLayer.className = 'markers';
    this.plot.over.append(this.markerLayer);
    this.resize = new ResizeObserver(() => {
      const width = Math.max(200, this.element.clientWidth);
      if (width !== this.plot.width) {
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

  /** Zoom to steps `[lo, hi]` and fetch their full resolution. */
  zoomToSteps(lo: number, hi: number): void {
    if (!(hi > lo)) return;
    this.zoom = { lo, hi };
    this.redraw();
    this.scheduleHistory();
  }

  resetZoom(): void {
    this.zoom = null;
    this.detail = null;
    this.fetchToken++;
    this.redraw();
  }

  /** The chart as a PNG data URL, with its title, on the theme's background. */
  png(): string {
    const source = this.plot.ctx.canvas;
    const titleHeight = 28 * devicePixelRatio;
    const canvas = document.createElement('canvas');
    canvas.width = source.width;
    canvas.height = source.height + titleHeight;
    const ctx = canvas.getContext('2d');
    if (!ctx) throw new Error('this browser cannot draw on a canvas');
    const css = getComputedStyle(document.body);
    ctx.fillStyle = css.getPropertyValue('--otf-bg').trim() || '#1e1e1e';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = css.getPropertyValue('--otf-fg').trim() || '#ccc';
    ctx.font = `${14 * devicePixelRatio}px sans-serif`;
    ctx.fillText(this.title, 8 * devicePixelRatio, 19 * devicePixelRatio);
    ctx.drawImage(source, 0, titleHeight);
    return canvas.toDataURL('image/png');
  }

  destroy(): void {
    if (this.fetchTimer) clearTimeout(this.fetchTimer);
    this.fetchToken++;
    this.resize.disconnect();
    this.plot.destroy();
    this.element.remove();
  }

  private redraw(): void {
    const input = this.input;
    const primary = input?.series[0];
    if (!input || !primary) return;
    this.drawStart = performance.now();
    if (this.detail && this.detail.key !== primary.key) this.detail = null;
    const points = this.composed(primary.data);
    const last = points.steps.length ? points.steps[points.steps.length - 1] : 0;
    this.map = axisFor(input.axis, input.epochStarts, last);
    const budget = Math.max(64, 2 * this.plot.width);
    const view = this.visible(points, budget);
    const tables = [view, ...input.series.slice(1).map((s) => this.visible(s.data, budget))];
    const [steps, ...columns] = align(tables);
    const data: (number | null | undefined)[][] = [steps.map(this.map.toX), [], [], [], []];
    const empty = steps.map(() => undefined);
    for (const slot of Object.values(SLOTS)) data[slot] = empty;
    input.series.forEach((s, i) => (data[SLOTS[s.split]] = columns[i]));
    if (primary.split === 'train' && input.smoothing.kind !== 'none') {
      data[SLOTS.smoothed] = alignSmoothed(columns[0], smooth(view.values, input.smoothing));
    }
    // What is on screen, readable by tests and tools without reaching into the chart.
    Object.assign(this.element.dataset, {
      points: String(view.steps.length),
      first: String(view.steps[0] ?? ''),
      last: String(view.steps.at(-1) ?? ''),
      detail: this.detail ? String(this.detail.points.steps.length) : '',
      splits: input.series.map((s) => s.split).join(' '),
    });
    this.setMarkers(input.markers);
    const aligned = data as uPlot.AlignedData;
    if (this.zoom) {
      const { lo: a, hi: b } = this.zoom;
      this.plot.batch(() => {
        this.plot.setData(aligned, false);
        this.plot.setScale('x', { min: this.map.toX(a), max: this.map.toX(b) });
      });
    } else {
      this.plot.setData(aligned, true);
    }
  }

  /** The zoomed range of `points` (one neighbour beyond each edge), decimated to `budget`. */
  private visible(points: Points, budget: number): Points {
    let lo = 0;
    let hi = points.steps.length;
    if (this.zoom) {
      // One point beyond each edge keeps the line running to the border.
      lo = Math.max(0, lowerBound(points.steps, this.zoom.lo) - 1);
      hi = Math.min(hi, upperBound(points.steps, this.zoom.hi) + 1);
    }
    return decimate(points, budget, lo, hi);
  }

  private setMarkers(markers: Marker[]): void {
    const signature = JSON.stringify(markers);
    if (signature === this.markerSignature) return;
    this.markerSignature = signature;
    this.markerLayer.replaceChildren(
      ...markers.map((m) => {
        const el = document.createElement('div');
        el.className = 'marker';
        el.title = m.label;
        el.dataset.testid = 'marker';
        el.dataset.step = String(m.step);
        el.setAttribute('aria-label', m.label);
        return el;
      }),
    );
  }

  /** Markers follow the x scale after every draw (zoom, pan, resize, new data). */
  private placeMarkers(): void {
    const width = this.plot.over.clientWidth;
    for (const el of this.markerLayer.children as HTMLCollectionOf<HTMLElement>) {
      const left = this.plot.valToPos(this.map.toX(Number(el.dataset.step)), 'x');
      el.hidden = !(left >= 0 && left <= width);
      el.style.left = `${left}px`;
    }
  }

  /** The local series with the fetched full-resolution window spliced in. */
  private composed(series: SeriesData): Points {
    const detail = this.detail;
    if (!detail || !this.zoom) return series;
    const { steps, values } = series;
    const before = lowerBound(steps, detail.lo);
    const after = upperBound(steps, Math.max(detail.hi, detail.points.steps.at(-1) ?? detail.hi));
    return {
      steps: steps.slice(0, before).concat(detail.points.steps, steps.slice(after)),
      values: values.slice(0, before).concat(detail.points.values, values.slice(after)),
    };
  }

  private scheduleHistory(): void {
    if (this.fetchTimer) clearTimeout(this.fetchTimer);
    this.fetchTimer = setTimeout(() => {
      this.fetchTimer = null;
      const zoom = this.zoom;
      if (!zoom) return;
      const token = ++this.fetchToken;
      const lo = Math.floor(zoom.lo);
      const hi = Math.ceil(zoom.hi);
      const key = this.input?.series[0]?.key;
      if (key === undefined) return;
      const maxPoints = Math.min(MAX_HISTORY_POINTS, Math.max(2, 2 * this.plot.width));
      void this.fetchHistory(key, lo, hi, maxPoints).then((points) => {
        if (token !== this.fetchToken || !points) return;
        this.detail = { key, lo, hi, points };
        this.redraw();
      });
    }, HISTORY_DELAY_MS);
  }

  private selected(u: uPlot): void {
    const { left, width } = u.select;
    if (width < 4) return;
    const lo = this.map.toStep(u.posToVal(left, 'x'));
    const hi = this.map.toStep(u.posToVal(left + width, 'x'));
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    this.zoomToSteps(lo, hi);
  }

  private visibleSteps(): { lo: number; hi: number } {
    const { min, max } = this.plot.scales.x;
    return { lo: this.map.toStep(min ?? 0), hi: this.map.toStep(max ?? 1) };
  }

  private wheel(event: WheelEvent): void {
    event.preventDefault();
    const { lo, hi } = this.visibleSteps();
    const at = this.map.toStep(this.plot.posToVal(event.offsetX, 'x'));
    const factor = event.deltaY > 0 ? 1.25 : 0.8;
    this.zoomToSteps(at - (at - lo) * factor, at + (hi - at) * factor);
  }

  private startPan(event: MouseEvent): void {
    const { lo, hi } = this.visibleSteps();
    this.pan = { x: event.clientX, lo, hi };
    const move = (e: MouseEvent): void => {
      if (!this.pan) return;
      const perPixel = (this.pan.hi - this.pan.lo) / Math.max(1, this.plot.bbox.width / devicePixelRatio);
      const shift = (this.pan.x - e.clientX) * perPixel;
      this.zoomToSteps(this.pan.lo + shift, this.pan.hi + shift);
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

/** The smoothed values of the dense series' points, placed where its points are in the join. */
function alignSmoothed(column: readonly (number | null | undefined)[], smoothed: readonly (number | null)[]): (number | null | undefined)[] {
  const out: (number | null | undefined)[] = new Array(column.length);
  let j = 0;
  for (let i = 0; i < column.length; i++) out[i] = column[i] === undefined ? undefined : smoothed[j++];
  return out;
}
