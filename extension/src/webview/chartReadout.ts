/**
 * The readout of a metric chart: beside the cursor, the step (its epoch and wall-clock time)
 * under it and each drawn series' nearest value. Its step and values are also in its
 * `data-` attributes, for tests and tools.
 */
import type uPlot from 'uplot';
import { upperBound } from '../common/decimate';
import { nearestIndex, type Composed, type Drawn } from './chartModel';
import { formatWallTime, timeAt } from './clock';
import { formatNumber } from './dom';

/** Show in `readout` what lies under `u`'s cursor in `composed` (hidden when nothing does). */
export function showReadout(readout: HTMLElement, u: uPlot, composed: Composed | null): void {
  const left = u.cursor.left ?? -1;
  if (left < 0 || !composed || composed.drawn.length === 0) {
    readout.hidden = true;
    return;
  }
  const x = u.posToVal(left, 'x');
  const primary = composed.drawn.find((d) => d.series.dense) ?? composed.drawn[0];
  const at = nearestIndex(primary.x, x);
  if (at < 0) {
    readout.hidden = true;
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
  readout.replaceChildren(el('div', 'readout-head', head), ...rows.map((r) => r.element));
  readout.dataset.step = String(step);
  readout.dataset.values = JSON.stringify(rows.map((r) => [r.label, r.value]));
  readout.hidden = false;
  // Beside the cursor, on the side with room.
  const width = u.over.clientWidth;
  const box = readout.offsetWidth || 180;
  readout.style.left = `${left + 14 + box > width ? Math.max(0, left - 14 - box) : left + 14}px`;
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
