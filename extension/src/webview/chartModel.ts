/**
 * What one chart draws, as data: the series of one metric (its splits, for one run or for
 * every run compared), each reduced to its visible range and min/max-decimated to about two
 * points per pixel, mapped to the x unit (steps or epochs, per run), smoothed if asked, then
 * joined on x for uPlot. Also where each series has a non-finite value (the wire's `null`).
 * Pure: no DOM, unit-tested.
 */
import type { Points } from '../common/decimate';
import { decimate, lowerBound, upperBound } from '../common/decimate';
import type { SeriesData, Split } from '../common/series';
import type { Clock } from '../protocol.gen';
import { align, type Aligned } from './align';
import { STEP_AXIS, type AxisMap } from './axis';
import { smooth, type Smoothing } from './smoothing';

export type SeriesStyle = 'line' | 'points' | 'line+points';

/** One series of a chart: a split of the chart's metric, of one run. */
export interface ChartSeries {
  /** Unique within the chart (run and series key). */
  id: string;
  /** The run it belongs to (its key in the page). */
  runKey: string;
  /** The session's name of the series (`loss`, `val/loss`): what `history` asks for. */
  key: string;
  split: Split;
  /** Its name in the legend and the readout. */
  label: string;
  color: string;
  style: SeriesStyle;
  /** Dashed line (`[dash, gap]` in CSS pixels). */
  dash?: number[];
  /** Zooming fetches its full-resolution points (the train series). */
  dense: boolean;
  data: SeriesData;
  /** Steps to this run's x unit and back. */
  map: AxisMap;
  clock: Clock | null;
  startedAt: number;
  epochStarts: readonly number[];
}

/** What is drawn of one series: its visible points (decimated), in x and in steps. */
export interface Drawn {
  series: ChartSeries;
  steps: number[];
  x: number[];
  values: (number | null)[];
  /** The smoothed line of a dense series, when smoothing is on. */
  smoothed: (number | null)[] | null;
}

/** A non-finite value (NaN or ±inf) of a series, where the chart marks it. */
export interface NonFinite {
  series: ChartSeries;
  step: number;
  x: number;
}

export interface Composed {
  /** uPlot's data: x, then per drawn series its values (and its smoothed values). */
  aligned: Aligned;
  drawn: Drawn[];
  nonFinite: NonFinite[];
}

/** Non-finite points marked per series at most (a diverged run is NaN from there on). */
export const MAX_NON_FINITE = 50;

/** The visible x range (`null`: everything). */
export interface XRange {
  lo: number;
  hi: number;
}

/**
 * The drawn data of `inputs` (each a series with the points to draw of it).
 *
 * Args: `zoom` the visible x range; `budget` points per series; `log` drops values <= 0 (a
 * log axis cannot place them); `smoothing` applies to dense series.
 */
export function compose(
  inputs: readonly { series: ChartSeries; points: Points }[],
  zoom: XRange | null,
  budget: number,
  smoothing: Smoothing,
  log: boolean,
): Composed {
  const drawn: Drawn[] = [];
  const nonFinite: NonFinite[] = [];
  for (const { series, points } of inputs) {
    const [lo, hi] = visibleRange(points.steps, series.map, zoom);
    const kept = decimate(points, budget, lo, hi);
    const map = series.map;
    const x = map === STEP_AXIS ? kept.steps : kept.steps.map((s) => map.toX(s));
    const values = log ? kept.values.map((v) => (v !== null && v > 0 ? v : null)) : kept.values;
    const smoothed = series.dense && smoothing.kind !== 'none' ? smooth(values, smoothing) : null;
    drawn.push({ series, steps: kept.steps, x, values, smoothed });
    const gaps = nullIndices(points);
    let marked = 0;
    for (let k = lowerBound(gaps, lo); k < gaps.length && gaps[k] < hi && marked < MAX_NON_FINITE; k++, marked++) {
      const step = points.steps[gaps[k]];
      nonFinite.push({ series, step, x: map.toX(step) });
    }
  }
  const tables: Points[] = [];
  for (const d of drawn) {
    tables.push({ steps: d.x, values: d.values });
    if (d.smoothed) tables.push({ steps: d.x, values: d.smoothed });
  }
  const aligned: Aligned = tables.length ? align(tables) : [[]];
  return { aligned, drawn, nonFinite };
}

const gapCache = new WeakMap<object, { rev: number; indices: number[] }>();

/**
 * The indices of `points`' null values (non-finite on the wire), in order. A series' list is
 * kept until it changes (its `rev`): a million-point series is not scanned at every draw.
 */
export function nullIndices(points: Points): number[] {
  const rev = (points as Partial<SeriesData>).rev;
  const cached = rev === undefined ? undefined : gapCache.get(points);
  if (cached && cached.rev === rev) return cached.indices;
  const indices: number[] = [];
  const { values } = points;
  for (let i = 0; i < values.length; i++) if (values[i] === null) indices.push(i);
  if (rev !== undefined) gapCache.set(points, { rev, indices });
  return indices;
}

/** The index range of `steps` inside `zoom` (one neighbour beyond each edge), or all. */
export function visibleRange(steps: readonly number[], map: AxisMap, zoom: XRange | null): [number, number] {
  if (!zoom) return [0, steps.length];
  const lo = Math.max(0, lowerBound(steps, map.toStep(zoom.lo)) - 1);
  const hi = Math.min(steps.length, upperBound(steps, map.toStep(zoom.hi)) + 1);
  return [lo, Math.max(lo, hi)];
}

/** The index of the point of `xs` (sorted) nearest to `x`, or -1 when there is none. */
export function nearestIndex(xs: readonly number[], x: number): number {
  if (xs.length === 0) return -1;
  const i = lowerBound(xs, x);
  if (i === 0) return 0;
  if (i >= xs.length) return xs.length - 1;
  return x - xs[i - 1] <= xs[i] - x ? i - 1 : i;
}
