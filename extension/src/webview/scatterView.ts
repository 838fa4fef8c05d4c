/**
 * A scatter plot element: a canvas that redraws its point cloud when resized, a colour
 * legend and a caption. The data map and the explorer panels each hold one. Points can be
 * picked (drawn on top, the others faded), and hovering a point shows what the panel says of
 * it (its numbers, the sample itself).
 */
import { h } from './dom';
import type { PointCloud } from './sampleData';
import { drawScatter, extentOf, fitCanvas, nearestPoint, themeRgb, type Coloring, type Extent, type Placement, type ScatterStyle } from './scatter';

export interface ScatterSpec {
  testId: string;
  xLabel: string;
  yLabel: string;
  /** The legend: text at the low end, the CSS class of its gradient, text at the high end. */
  legend: [string, string, string];
  /** How the points of `cloud` are coloured (read at each draw: the theme may change). */
  coloring(cloud: PointCloud): Coloring;
  /** A fixed extent (the data map's axes are probabilities); by default the points' box. */
  extent?(cloud: PointCloud): Extent;
  /** What the tooltip of point `i` shows (`null`: no tooltip). */
  hover?(cloud: PointCloud, i: number): HTMLElement | null;
}

/** CSS pixels around the cursor a hovered point may be. */
const HOVER_RADIUS = 8;

export class ScatterView {
  readonly canvas: HTMLCanvasElement;
  readonly caption = h('p', { class: 'muted plot-caption' });
  readonly element: HTMLElement;
  private readonly tip = h('div', { class: 'scatter-tip', hidden: true, 'data-testid': 'scatter-tip' });
  private cloud: PointCloud | null = null;
  /** The extent of the last draw (`null` with nothing drawn): what a position on it means. */
  extent: Extent | null = null;
  private placed: Placement | null = null;
  private picked: ReadonlySet<number> | null = null;
  private hovered = -1;

  constructor(private readonly spec: ScatterSpec) {
    this.canvas = h('canvas', { class: 'plot-canvas', 'data-testid': spec.testId });
    const [low, gradient, high] = spec.legend;
    const area = h('div', { class: 'plot-area scatter-area' }, this.canvas, this.tip);
    this.element = h(
      'div',
      {},
      area,
      h('div', { class: 'legend-scale muted' }, h('span', {}, low), h('span', { class: `gradient ${gradient}` }), h('span', {}, high)),
      this.caption,
    );
    new ResizeObserver(() => this.draw()).observe(this.canvas);
    if (spec.hover) {
      area.addEventListener('pointermove', (e) => this.move(e));
      area.addEventListener('pointerleave', () => this.hide());
    }
  }

  /** Show `cloud` (`null`: nothing, with `message` as the caption). */
  set(cloud: PointCloud | null, message: string): void {
    this.cloud = cloud;
    this.caption.textContent = message;
    this.hide();
    this.draw();
  }

  /** Pick the points of these dataset indices (`null`: none picked). */
  highlight(indices: ReadonlySet<number> | null): void {
    this.picked = indices;
    this.draw();
  }

  draw(): void {
    fitCanvas(this.canvas);
    const cloud = this.cloud;
    this.canvas.dataset.points = cloud ? String(cloud.points.x.length) : '';
    this.canvas.dataset.total = cloud ? String(cloud.total) : '';
    this.extent = null;
    if (!cloud) {
      this.placed = null;
      this.canvas.getContext('2d')?.clearRect(0, 0, this.canvas.width, this.canvas.height);
      return;
    }
    const picked = this.picked;
    const index = cloud.points.index;
    let count = 0;
    if (picked) for (let i = 0; i < index.length; i++) if (picked.has(index[i])) count++;
    this.canvas.dataset.picked = picked ? String(count) : '';
    const style: ScatterStyle = {
      coloring: this.spec.coloring(cloud),
      background: themeRgb('--otf-panel', [37, 37, 38]),
      axis: getComputedStyle(document.body).getPropertyValue('--otf-muted').trim() || '#9d9d9d',
      xLabel: this.spec.xLabel,
      yLabel: this.spec.yLabel,
      highlight: picked ? (i) => picked.has(index[i]) : null,
    };
    const extent = this.spec.extent?.(cloud) ?? extentOf(cloud.points.x, cloud.points.y);
    this.placed = drawScatter(this.canvas, cloud.points, extent, style);
    this.extent = extent;
  }

  private move(e: PointerEvent): void {
    const cloud = this.cloud;
    const placed = this.placed;
    if (!cloud || !placed || !this.spec.hover) return;
    const box = this.canvas.getBoundingClientRect();
    const x = e.clientX - box.left;
    const y = e.clientY - box.top;
    const i = nearestPoint(placed, x, y, HOVER_RADIUS);
    if (i < 0) return this.hide();
    if (i !== this.hovered) {
      this.hovered = i;
      const content = this.spec.hover(cloud, i);
      if (!content) return this.hide();
      this.tip.replaceChildren(content);
      this.tip.dataset.index = String(cloud.points.index[i]);
    }
    this.tip.hidden = false;
    const right = x + 16 + this.tip.offsetWidth > box.width;
    this.tip.style.left = `${right ? Math.max(0, x - 16 - this.tip.offsetWidth) : x + 16}px`;
    this.tip.style.top = `${Math.max(0, Math.min(box.height - this.tip.offsetHeight, y - 20))}px`;
  }

  private hide(): void {
    this.hovered = -1;
    this.tip.hidden = true;
  }
}
