/**
 * The loss histogram's geometry and drawing. The session bins the losses (a million samples
 * cost the page `bins` numbers), so drawing is one bar per bin on a canvas; a dragged region
 * is snapped outwards to whole bins, so what is selected is exactly what the bars show.
 */
import type { HistogramReply } from '../protocol.gen';
import { countLabel, countTicks } from './ticks';

export const MIN_BINS = 10;
export const MAX_BINS = 1000;
/** CSS pixels per bar the histogram asks the session for. */
const PIXELS_PER_BIN = 4;
/** Name of the performance measure of each histogram draw. */
export const HISTOGRAM_MEASURE = 'onthefly:histogram-draw';

/** Bins for a plot `width` CSS pixels wide. */
export function binsForWidth(width: number): number {
  return Math.max(MIN_BINS, Math.min(MAX_BINS, Math.round(width / PIXELS_PER_BIN)));
}

/** The bin under `fraction` (0 = left edge, 1 = right edge) of the plot. */
export function binAt(bins: number, fraction: number): number {
  return Math.max(0, Math.min(bins - 1, Math.floor(fraction * bins)));
}

export interface LossRange {
  lo: number;
  hi: number;
  /** Samples the histogram counts in the range. */
  count: number;
}

/** The loss range of a drag between plot fractions `a` and `b`, snapped out to whole bins. */
export function dragRange(hist: Pick<HistogramReply, 'edges' | 'counts'>, a: number, b: number): LossRange {
  const bins = hist.counts.length;
  const first = binAt(bins, Math.min(a, b));
  const last = binAt(bins, Math.max(a, b));
  let count = 0;
  for (let i = first; i <= last; i++) count += hist.counts[i];
  return { lo: hist.edges[first], hi: hist.edges[last + 1], count };
}

export interface HistogramColors {
  bar: string;
  axis: string;
  grid: string;
}

/** CSS pixels under the bars for the loss labels. */
export const AXIS_HEIGHT = 16;

/** A count tick of the y axis: its value and its height from the top, in CSS pixels. */
export interface CountTick {
  value: number;
  y: number;
}

/** Count ticks for counts up to `max` on a plot `height` CSS pixels tall (`log`: log(1 + n)). */
export function countAxis(max: number, height: number, log: boolean): CountTick[] {
  if (!(max > 0)) return [{ value: 0, y: height }];
  const scale = log ? (n: number) => Math.log1p(n) : (n: number) => n;
  const top = scale(max);
  const values = log ? [0, ...Array.from({ length: Math.floor(Math.log10(max)) + 1 }, (_, k) => 10 ** k)] : countTicks(max, 4);
  return values.map((value) => ({ value, y: height - (scale(value) / top) * (height - 2) }));
}

/**
 * Draw `hist` filling `canvas` (its backing size must already match its CSS size × dpr);
 * `log` scales counts as log(1 + n). Returns the count ticks (gridlines drawn), for the y axis.
 */
export function drawHistogram(canvas: HTMLCanvasElement, hist: HistogramReply, log: boolean, colors: HistogramColors): CountTick[] {
  const start = performance.now();
  const ctx = canvas.getContext('2d');
  if (!ctx) return [];
  const dpr = canvas.width / Math.max(1, canvas.clientWidth || canvas.width);
  const width = canvas.width;
  const plotHeight = canvas.height - AXIS_HEIGHT * dpr;
  ctx.clearRect(0, 0, width, canvas.height);
  const scale = log ? (n: number) => Math.log1p(n) : (n: number) => n;
  let top = 0;
  for (const n of hist.counts) top = Math.max(top, scale(n));
  const bins = hist.counts.length;
  const barWidth = width / bins;
  let most = 0;
  for (const n of hist.counts) most = Math.max(most, n);
  const ticks = countAxis(most, plotHeight / dpr, log);
  ctx.fillStyle = colors.grid;
  for (const tick of ticks) ctx.fillRect(0, Math.round(tick.y * dpr), width, 1);
  ctx.fillStyle = colors.bar;
  for (let i = 0; i < bins; i++) {
    const n = hist.counts[i];
    if (!(n > 0)) continue;
    // Every non-empty bin shows at least one pixel: a lone outlier must stay visible.
    const height = Math.max(1, top > 0 ? (scale(n) / top) * (plotHeight - 2) : 0);
    ctx.fillRect(Math.floor(i * barWidth), plotHeight - height, Math.max(1, Math.ceil(barWidth) - (barWidth > 3 ? 1 : 0)), height);
  }
  ctx.fillStyle = colors.axis;
  ctx.fillRect(0, plotHeight, width, 1);
  ctx.font = `${11 * dpr}px sans-serif`;
  ctx.textBaseline = 'bottom';
  const labels = 5;
  for (let t = 0; t <= labels; t++) {
    const value = hist.edges[0] + ((hist.edges[bins] - hist.edges[0]) * t) / labels;
    const label = Number(value.toPrecision(3)).toString();
    ctx.textAlign = t === 0 ? 'left' : t === labels ? 'right' : 'center';
    ctx.fillText(label, (width * t) / labels, canvas.height);
  }
  performance.measure(HISTOGRAM_MEASURE, { start, end: performance.now() });
  return ticks;
}

/** The count axis left of the bars: `ticks` as labels on `canvas`, and its title. */
export function drawCountAxis(canvas: HTMLCanvasElement, ticks: readonly CountTick[], color: string, log: boolean): void {
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const dpr = canvas.width / Math.max(1, canvas.clientWidth || canvas.width);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = color;
  ctx.font = `${10 * dpr}px sans-serif`;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (const tick of ticks) ctx.fillText(countLabel(tick.value), canvas.width - 3 * dpr, Math.max(6 * dpr, tick.y * dpr));
  ctx.save();
  ctx.translate(7 * dpr, (canvas.height - AXIS_HEIGHT * dpr) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.fillText(log ? 'samples (log)' : 'samples', 0, 0);
  ctx.restore();
}
