/** A metric chart as a PNG: its title and legend above the plot with its axes and markers. */
import type uPlot from 'uplot';
import type { ChartMarkers } from './chartMarkers';
import { cssValue } from './dom';

/** One line of the legend: a series' label, colour and dash. */
export interface LegendEntry {
  label: string;
  color: string;
  dash?: number[];
}

/** The chart drawn by `plot` as a PNG data URL. */
export function chartImage(plot: uPlot, title: string, legend: LegendEntry[], markers: ChartMarkers): string {
  const dpr = devicePixelRatio;
  const source = plot.ctx.canvas;
  const lineHeight = 18 * dpr;
  const head = 28 * dpr + Math.ceil(legend.length / 4) * lineHeight;
  const canvas = document.createElement('canvas');
  canvas.width = source.width;
  canvas.height = source.height + head;
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('this browser cannot draw on a canvas');
  ctx.fillStyle = cssValue('--otf-bg', '#1e1e1e');
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = cssValue('--otf-fg', '#ccc');
  ctx.font = `${14 * dpr}px sans-serif`;
  ctx.fillText(title, 8 * dpr, 19 * dpr);
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
    ctx.fillStyle = cssValue('--otf-fg', '#ccc');
    ctx.fillText(label, x + 24 * dpr, y + 4 * dpr);
  });
  ctx.drawImage(source, 0, head);
  markers.drawOn(ctx, plot, head);
  return canvas.toDataURL('image/png');
}
