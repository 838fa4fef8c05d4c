/**
 * The markers of a metric chart: a dashed line per hyperparameter change or alert, a
 * triangle per NaN or infinite value. They are DOM elements over the plot (each with its
 * label as a tooltip), moved to the x scale after every draw, and drawn into an exported
 * image since they are not on the canvas.
 */
import type uPlot from 'uplot';
import { STEP_AXIS, type AxisMap } from './axis';
import type { Composed } from './chartModel';
import { cssValue } from './dom';

/** A vertical line at a step, e.g. a hyperparameter change or an alert; `label` is its tooltip. */
export interface Marker {
  step: number;
  label: string;
  kind: 'hparam' | 'error' | 'warning';
  /** The x mapping of the run the marker belongs to (default: the chart's first series'). */
  map?: AxisMap;
}

export class ChartMarkers {
  readonly layer = document.createElement('div');
  private signature = '';

  constructor() {
    this.layer.className = 'markers';
  }

  /** Show `markers` and the non-finite values of `composed`; `primary` is the first series' axis. */
  set(markers: Marker[], composed: Composed, primary: AxisMap = STEP_AXIS): void {
    const nonFinite = composed.nonFinite.map((n) => ({
      x: n.x,
      label: `${n.series.label}: NaN or infinite at step ${n.step}`,
      kind: 'nonfinite',
    }));
    const lines = markers.map((m) => ({ x: (m.map ?? primary).toX(m.step), label: m.label, kind: m.kind }));
    const all = [...lines, ...nonFinite];
    const signature = JSON.stringify(all);
    if (signature === this.signature) return;
    this.signature = signature;
    this.layer.replaceChildren(
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
  place(plot: uPlot): void {
    const width = plot.over.clientWidth;
    for (const el of this.layer.children as HTMLCollectionOf<HTMLElement>) {
      const left = plot.valToPos(Number(el.dataset.x), 'x');
      el.hidden = !(left >= 0 && left <= width);
      el.style.left = `${left}px`;
    }
  }

  /** The markers, drawn into an exported image `top` canvas pixels below its top. */
  drawOn(ctx: CanvasRenderingContext2D, plot: uPlot, top: number): void {
    const dpr = devicePixelRatio;
    const colors: Record<string, string> = {
      hparam: cssValue('--otf-marker', '#CC79A7'),
      error: cssValue('--otf-error', '#D55E00'),
      warning: '#E69F00',
      nonfinite: cssValue('--otf-error', '#D55E00'),
    };
    const { top: plotTop, height } = plot.bbox;
    for (const el of this.layer.children as HTMLCollectionOf<HTMLElement>) {
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
}
