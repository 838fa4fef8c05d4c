/**
 * Pan and zoom of an SVG drawing as arithmetic on its `viewBox`: the part of the drawing
 * the element shows. The view always has the element's aspect ratio, so one unit of the
 * drawing is the same number of pixels across and down.
 */
import type { Box } from './lineageLayout';

export interface Size {
  width: number;
  height: number;
}

/** Screen pixels per drawing unit, at most (a small graph is not blown up). */
export const MAX_SCALE = 1;
/** ... and at least (a huge graph still shows its nodes as dots, not nothing). */
export const MIN_SCALE = 0.05;

/** The view showing all of `bounds` (plus `margin` units) centred in a `viewport`. */
export function fitView(bounds: Box, viewport: Size, margin = 16): Box {
  const width = Math.max(1, bounds.width + 2 * margin);
  const height = Math.max(1, bounds.height + 2 * margin);
  const scale = clamp(Math.min(viewport.width / width, viewport.height / height), MIN_SCALE, MAX_SCALE);
  return centred(bounds.x + bounds.width / 2, bounds.y + bounds.height / 2, viewport, scale);
}

/**
 * Zoom `view` by `factor` (> 1 zooms in) around the point under the cursor, at `at` (0..1
 * across and down the element), which stays where it is on screen.
 */
export function zoomAt(view: Box, viewport: Size, factor: number, at: { x: number; y: number }): Box {
  const scale = clamp(scaleOf(view, viewport) * factor, MIN_SCALE, MAX_SCALE * 4);
  const width = viewport.width / scale;
  const height = viewport.height / scale;
  return {
    x: view.x + (view.width - width) * at.x,
    y: view.y + (view.height - height) * at.y,
    width,
    height,
  };
}

/** Move `view` with a drag of `dx`, `dy` screen pixels (the drawing follows the pointer). */
export function panBy(view: Box, viewport: Size, dx: number, dy: number): Box {
  const scale = scaleOf(view, viewport);
  return { ...view, x: view.x - dx / scale, y: view.y - dy / scale };
}

/** Screen pixels per drawing unit of `view` in `viewport`. */
export function scaleOf(view: Box, viewport: Size): number {
  return viewport.width / Math.max(1e-9, view.width);
}

export function viewBoxText(view: Box): string {
  return [view.x, view.y, view.width, view.height].map((v) => Number(v.toFixed(2))).join(' ');
}

function centred(cx: number, cy: number, viewport: Size, scale: number): Box {
  const width = viewport.width / scale;
  const height = viewport.height / scale;
  return { x: cx - width / 2, y: cy - height / 2, width, height };
}

function clamp(value: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, value));
}
