/**
 * Scatter plots of many points (the data map, the explorer) on a canvas: positions and
 * colour values in typed arrays, each point written as a small square straight into the
 * pixel buffer (no path per point), so hundreds of thousands of points draw in milliseconds.
 */
import type { ScatterPoints } from './sampleData';

/** Name of the performance measure of each scatter draw. */
export const SCATTER_MEASURE = 'onthefly:scatter-draw';

export interface Extent {
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/** The bounding box of the finite points, padded by 3 % (a fallback box when none is finite). */
export function extentOf(xs: ArrayLike<number>, ys: ArrayLike<number>): Extent {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i], y = ys[i];
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
  }
  if (x0 > x1) return { x0: 0, x1: 1, y0: 0, y1: 1 };
  const px = (x1 - x0 || 1) * 0.03, py = (y1 - y0 || 1) * 0.03;
  return { x0: x0 - px, x1: x1 + px, y0: y0 - py, y1: y1 + py };
}

export type Rgb = [number, number, number];

/** A pixel of the canvas's RGBA buffer, read as one little-endian 32-bit word. */
export function packRgb([r, g, b]: Rgb): number {
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

/** `steps` colours from `from` to `to`. */
export function ramp(from: Rgb, to: Rgb, steps: number): Uint32Array {
  const out = new Uint32Array(steps);
  for (let i = 0; i < steps; i++) {
    const t = steps > 1 ? i / (steps - 1) : 0;
    out[i] = packRgb([0, 1, 2].map((c) => Math.round(from[c] + (to[c] - from[c]) * t)) as Rgb);
  }
  return out;
}

/** The value at quantile `q` of the finite values (NaN when there are none). */
export function quantile(values: Float32Array, q: number): number {
  const finite = values.filter(Number.isFinite).sort();
  if (finite.length === 0) return NaN;
  return finite[Math.min(finite.length - 1, Math.floor(q * (finite.length - 1)))];
}

/** How each point gets its colour: by `value` through a lookup table over [lo, hi]; NaN gets `missing`. */
export interface Coloring {
  table: Uint32Array;
  lo: number;
  hi: number;
  missing: number;
}

export function colorIndex(value: number, coloring: Pick<Coloring, 'lo' | 'hi'>, steps: number): number {
  const span = coloring.hi - coloring.lo;
  const t = span > 0 ? (value - coloring.lo) / span : 0;
  return Math.max(0, Math.min(steps - 1, Math.round(t * (steps - 1))));
}

export interface ScatterStyle {
  coloring: Coloring;
  background: Rgb;
  axis: string;
  /** Axis titles. */
  xLabel: string;
  yLabel: string;
  /** Points picked (a selected region): drawn on top, the others faded. */
  highlight?: ((i: number) => boolean) | null;
}

/** Where each point was drawn, in CSS pixels from the canvas' top left (NaN: not drawn). */
export interface Placement {
  x: Float32Array;
  y: Float32Array;
}

/** The point drawn nearest to (`x`, `y`), within `radius` CSS pixels, or -1. */
export function nearestPoint(placed: Placement, x: number, y: number, radius: number): number {
  let best = -1;
  let bestDistance = radius * radius;
  for (let i = 0; i < placed.x.length; i++) {
    const dx = placed.x[i] - x;
    const dy = placed.y[i] - y;
    const distance = dx * dx + dy * dy;
    if (distance <= bestDistance) {
      bestDistance = distance;
      best = i;
    }
  }
  return best;
}

/** `color` faded towards `background` (a packed pixel). */
function fade(color: number, background: number, keep: number): number {
  let out = 0xff000000;
  for (const shift of [0, 8, 16]) {
    const c = (color >>> shift) & 0xff;
    const b = (background >>> shift) & 0xff;
    out |= Math.round(b + (c - b) * keep) << shift;
  }
  return out >>> 0;
}

/** The plot's margins around the points, in CSS pixels (the axis labels sit in them). */
export const MARGIN = { left: 34, bottom: 18, top: 4, right: 6 };

/** Draw `points` over `extent` filling `canvas` (backing size = CSS size × dpr); returns where. */
export function drawScatter(canvas: HTMLCanvasElement, points: ScatterPoints, extent: Extent, style: ScatterStyle): Placement {
  const start = performance.now();
  const placed: Placement = { x: new Float32Array(points.x.length).fill(NaN), y: new Float32Array(points.x.length).fill(NaN) };
  const ctx = canvas.getContext('2d');
  if (!ctx) return placed;
  const dpr = canvas.width / Math.max(1, canvas.clientWidth || canvas.width);
  const left = Math.round(MARGIN.left * dpr), top = Math.round(MARGIN.top * dpr);
  const width = Math.max(1, canvas.width - left - Math.round(MARGIN.right * dpr));
  const height = Math.max(1, canvas.height - top - Math.round(MARGIN.bottom * dpr));
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const image = ctx.createImageData(width, height);
  const pixels = new Uint32Array(image.data.buffer);
  pixels.fill(packRgb(style.background));
  const { table, missing } = style.coloring;
  const size = Math.max(2, Math.round(2 * dpr));
  const sx = (width - size) / (extent.x1 - extent.x0 || 1);
  const sy = (height - size) / (extent.y1 - extent.y0 || 1);
  const { x, y, value } = points;
  const highlight = style.highlight ?? null;
  const background = packRgb(style.background);
  // Two passes when some points are picked: the others first, faded, then the picked on top.
  for (const pass of highlight ? ['rest', 'picked'] : ['all']) {
    const grow = pass === 'picked' ? 1 : 0;
    for (let i = 0; i < x.length; i++) {
      if (highlight && highlight(i) !== (pass === 'picked')) continue;
      const px = Math.floor((x[i] - extent.x0) * sx);
      const py = height - size - Math.floor((y[i] - extent.y0) * sy);
      if (!(px >= 0 && py >= 0 && px <= width - size - grow && py <= height - size - grow)) continue;
      const v = value[i];
      let color = Number.isFinite(v) ? table[colorIndex(v, style.coloring, table.length)] : missing;
      if (pass === 'rest') color = fade(color, background, 0.3);
      for (let dy = 0; dy < size + grow; dy++) pixels.fill(color, (py + dy) * width + px, (py + dy) * width + px + size + grow);
      placed.x[i] = (left + px + size / 2) / dpr;
      placed.y[i] = (top + py + size / 2) / dpr;
    }
  }
  ctx.putImageData(image, left, top);
  ctx.fillStyle = style.axis;
  ctx.font = `${10 * dpr}px sans-serif`;
  const label = (v: number): string => Number(v.toPrecision(2)).toString();
  ctx.textBaseline = 'bottom';
  ctx.textAlign = 'left';
  ctx.fillText(label(extent.x0), left, canvas.height);
  ctx.textAlign = 'right';
  ctx.fillText(label(extent.x1), left + width, canvas.height);
  ctx.textAlign = 'center';
  ctx.fillText(style.xLabel, left + width / 2, canvas.height);
  ctx.textBaseline = 'top';
  ctx.textAlign = 'right';
  ctx.fillText(label(extent.y1), left - 3 * dpr, top);
  ctx.textBaseline = 'bottom';
  ctx.fillText(label(extent.y0), left - 3 * dpr, top + height);
  ctx.save();
  ctx.translate(10 * dpr, top + height / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillText(style.yLabel, 0, 0);
  ctx.restore();
  performance.measure(SCATTER_MEASURE, { start, end: performance.now() });
  return placed;
}

/** An RGB colour of any CSS colour string (resolved by the canvas itself). */
export function cssRgb(css: string, fallback: Rgb): Rgb {
  const ctx = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
  if (!ctx || !css) return fallback;
  ctx.fillStyle = '#000';
  ctx.fillStyle = css;
  ctx.fillRect(0, 0, 1, 1);
  const [r, g, b] = ctx.getImageData(0, 0, 1, 1).data;
  return [r, g, b];
}

/** A theme colour (`--otf-…` custom property of the body) as RGB. */
export function themeRgb(name: string, fallback: Rgb): Rgb {
  return cssRgb(getComputedStyle(document.body).getPropertyValue(name).trim(), fallback);
}

/** Size `canvas`'s backing store to its CSS box × dpr; returns whether it changed. */
export function fitCanvas(canvas: HTMLCanvasElement): boolean {
  const dpr = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * dpr));
  const height = Math.max(1, Math.round(canvas.clientHeight * dpr));
  if (canvas.width === width && canvas.height === height) return false;
  canvas.width = width;
  canvas.height = height;
  return true;
}
