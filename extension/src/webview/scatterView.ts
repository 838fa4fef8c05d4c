/**
 * A scatter plot element: a canvas that redraws its point cloud when resized, a colour
 * legend and a caption. The data map and the explorer panels each hold one.
 */
import { h } from './dom';
import type { PointCloud } from './sampleReplies';
import { drawScatter, extentOf, fitCanvas, themeRgb, type Coloring, type Extent, type ScatterStyle } from './scatter';

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
}

export class ScatterView {
  readonly canvas: HTMLCanvasElement;
  readonly caption = h('p', { class: 'muted plot-caption' });
  readonly element: HTMLElement;
  private cloud: PointCloud | null = null;
  /** The extent of the last draw (`null` with nothing drawn): what a position on it means. */
  extent: Extent | null = null;

  constructor(private readonly spec: ScatterSpec) {
    this.canvas = h('canvas', { class: 'plot-canvas', 'data-testid': spec.testId });
    const [low, gradient, high] = spec.legend;
    this.element = h(
      'div',
      {},
      h('div', { class: 'plot-area scatter-area' }, this.canvas),
      h('div', { class: 'legend-scale muted' }, h('span', {}, low), h('span', { class: `gradient ${gradient}` }), h('span', {}, high)),
      this.caption,
    );
    new ResizeObserver(() => this.draw()).observe(this.canvas);
  }

  /** Show `cloud` (`null`: nothing, with `message` as the caption). */
  set(cloud: PointCloud | null, message: string): void {
    this.cloud = cloud;
    this.caption.textContent = message;
    this.draw();
  }

  draw(): void {
    fitCanvas(this.canvas);
    const cloud = this.cloud;
    this.canvas.dataset.points = cloud ? String(cloud.points.x.length) : '';
    this.canvas.dataset.total = cloud ? String(cloud.total) : '';
    this.extent = null;
    if (!cloud) {
      this.canvas.getContext('2d')?.clearRect(0, 0, this.canvas.width, this.canvas.height);
      return;
    }
    const style: ScatterStyle = {
      coloring: this.spec.coloring(cloud),
      background: themeRgb('--otf-panel', [37, 37, 38]),
      axis: getComputedStyle(document.body).getPropertyValue('--otf-muted').trim() || '#9d9d9d',
      xLabel: this.spec.xLabel,
      yLabel: this.spec.yLabel,
    };
    const extent = this.spec.extent?.(cloud) ?? extentOf(cloud.points.x, cloud.points.y);
    drawScatter(this.canvas, cloud.points, extent, style);
    this.extent = extent;
  }
}
