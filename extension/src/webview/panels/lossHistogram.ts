/**
 * The loss histogram of one split, binned by the session (`histogram`: about one bar per
 * four pixels over the visible loss range). Drag across the bars to select a loss range: it
 * becomes a named selection of the run (`select` with `loss_min` / `loss_max`) that the
 * sample table then lists, and Fork… (train split) trains a copy of the model on. Zoom
 * narrows the range to the last region (finer bins), Reset widens it again; Log scales the
 * counts.
 */
import { formatNumber, h } from '../dom';
import { binAt, binsForWidth, dragRange, drawCountAxis, drawHistogram, type LossRange } from '../histogram';
import { replyOf } from '../../common/replies';
import type { HistogramReply } from '../../protocol.gen';
import { selectionName, type SampleSplit } from '../sampleData';
import { SPLIT_COLORS } from '../palette';
import { fitCanvas } from '../scatter';
import { AckLines, type Send } from './controls';
import { describeSelection, type ForkOpener } from './selections';

/** Drags shorter than this many CSS pixels are clicks, not regions. */
const MIN_DRAG_PX = 3;

export interface HistogramHooks {
  send: Send;
  /** A selection named `name` was made in run `runKey`. */
  selected(runKey: string, name: string): void;
  fork: ForkOpener;
}

/** What to do when a split has no per-sample losses yet. */
export const NO_LOSSES_HINT =
  'Per-sample losses come from every training step once OnTheFly knows the loss function ' +
  '(onthefly.Trainer(loss_fn=…), or OnTheFly(loss_fn=…) with Lightning; see docs/per-sample.md). ' +
  'Scan evaluates a whole split (train, val or test) with the current model now.';

export function histogramCaption(hist: HistogramReply): string {
  const outside = hist.below + hist.above;
  return [
    `${hist.split} · ${hist.source} at step ${hist.step}`,
    `${hist.total} samples`,
    `mean loss ${formatNumber(hist.mean)}`,
    outside ? `${outside} outside the range` : '',
    hist.missing ? `${hist.missing} without a loss` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

export class LossHistogramPanel {
  readonly element = h('section', { class: 'panel loss-histogram', 'aria-label': 'Loss histogram' });
  private readonly canvas = h('canvas', { class: 'plot-canvas', 'data-testid': 'histogram' });
  private readonly yAxis = h('canvas', { class: 'count-axis', 'data-testid': 'histogram-y-axis' });
  private readonly region = h('div', { class: 'plot-region', hidden: true });
  private readonly caption = h('p', { class: 'muted plot-caption', 'data-testid': 'histogram-caption' });
  private readonly readout = h('span', { class: 'muted readout', 'data-testid': 'histogram-readout' });
  private readonly log = h('input', { type: 'checkbox', 'aria-label': 'Log scale' });
  private readonly zoomButton = h('button', { class: 'small', title: 'Show only the selected loss range, in finer bins' }, 'Zoom');
  private readonly resetButton = h('button', { class: 'small', title: 'Show every loss again' }, 'Reset');
  private readonly refreshButton = h('button', { class: 'small', 'data-testid': 'histogram-refresh', title: 'Ask the run again' }, 'Refresh');
  private readonly forkButton = h('button', { class: 'small', 'data-testid': 'histogram-fork', title: 'Train a copy of the model on the selected samples' }, 'Fork…');
  /** The selection the last drag made (train split only: forks train on the training set). */
  private made: { name: string; size: number } | null = null;
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'histogram-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private hist: HistogramReply | null = null;
  private zoom: { lo: number; hi: number } | null = null;
  private chosen: LossRange | null = null;
  private dragFrom: number | null = null;
  private runKey = '';
  private split: SampleSplit = 'train';
  private live = false;
  private ticket = 0;
  private emptyText = '';

  constructor(private readonly hooks: HistogramHooks) {
    const plot = h('div', { class: 'plot-area histogram-area' }, this.canvas, this.region);
    const frame = h('div', { class: 'histogram-frame' }, this.yAxis, plot);
    plot.addEventListener('pointerdown', (e) => this.dragStart(e, plot));
    plot.addEventListener('pointermove', (e) => this.dragMove(e));
    plot.addEventListener('pointerup', (e) => this.dragEnd(e));
    plot.addEventListener('pointerleave', () => this.dragFrom === null && (this.readout.textContent = ''));
    this.log.addEventListener('change', () => this.draw());
    this.zoomButton.addEventListener('click', () => this.setZoom(this.chosen));
    this.resetButton.addEventListener('click', () => this.setZoom(null));
    this.refreshButton.addEventListener('click', () => this.refresh());
    this.forkButton.addEventListener('click', () => this.made && this.hooks.fork(this.runKey, this.made.name, this.made.size));
    new ResizeObserver(() => {
      this.draw();
      // Fetched while hidden (no width yet), the bins were too coarse for the plot now shown.
      const wanted = binsForWidth(this.canvas.clientWidth);
      if (this.hist && this.canvas.clientWidth > 0 && Math.abs(wanted - this.hist.counts.length) > wanted / 5) this.refresh();
    }).observe(this.canvas);
    this.element.append(
      h('h3', {}, 'Loss distribution'),
      h('div', { class: 'toolbar' }, h('label', { class: 'muted' }, this.log, ' log'), this.zoomButton, this.resetButton, this.refreshButton, this.forkButton, this.readout),
      frame,
      this.caption,
      this.ack,
    );
    this.updateButtons();
  }

  /** Show `split` of run `runKey`; a different run or split is fetched at once. */
  show(runKey: string, split: SampleSplit, live: boolean): void {
    this.live = live;
    if (runKey === this.runKey && split === this.split) return this.updateButtons();
    this.runKey = runKey;
    this.split = split;
    this.ticket++; // an answer still on its way is for the run or split shown before
    this.acks.show(runKey);
    this.hist = null;
    this.zoom = this.chosen = null;
    this.made = null;
    this.region.hidden = true;
    this.caption.textContent = '';
    this.draw();
    this.refresh();
  }

  /** What the panel says while it has no histogram (`''`: nothing). */
  setEmpty(text: string): void {
    if (text === this.emptyText) return;
    this.emptyText = text;
    if (!this.hist) this.caption.textContent = text;
  }

  /** Fetch the histogram of the current view (after a scan, a pause, a click on Refresh). */
  refresh(): void {
    this.updateButtons();
    if (!this.runKey || !this.live) return;
    const ticket = ++this.ticket;
    const range = this.zoom ? { min: this.zoom.lo, max: this.zoom.hi } : {};
    const bins = binsForWidth(this.canvas.clientWidth);
    void this.hooks.send({ type: 'histogram', split: this.split, bins, ...range }).then((raw) => {
      if (ticket !== this.ticket) return;
      const outcome = replyOf('histogram', raw);
      this.hist = outcome.ok ? outcome.data : null;
      this.caption.textContent = outcome.ok ? histogramCaption(outcome.data) : `No ${this.split} losses yet: ${outcome.message}. ${NO_LOSSES_HINT}`;
      this.draw();
    });
  }

  private draw(): void {
    fitCanvas(this.canvas);
    fitCanvas(this.yAxis);
    const hist = this.hist;
    this.canvas.dataset.total = hist ? String(hist.total) : '';
    this.canvas.dataset.bins = hist ? String(hist.counts.length) : '';
    if (!hist) {
      this.canvas.getContext('2d')?.clearRect(0, 0, this.canvas.width, this.canvas.height);
      this.yAxis.getContext('2d')?.clearRect(0, 0, this.yAxis.width, this.yAxis.height);
      return;
    }
    const css = getComputedStyle(document.body);
    const muted = css.getPropertyValue('--otf-muted').trim() || '#9d9d9d';
    const ticks = drawHistogram(this.canvas, hist, this.log.checked, {
      bar: SPLIT_COLORS.train,
      axis: css.getPropertyValue('--otf-muted').trim() || '#9d9d9d',
      grid: css.getPropertyValue('--otf-grid').trim() || '#8883',
    });
    drawCountAxis(this.yAxis, ticks, muted, this.log.checked);
    this.yAxis.dataset.ticks = ticks.map((t) => t.value).join(' ');
  }

  private fraction(e: PointerEvent): number {
    const box = this.canvas.getBoundingClientRect();
    return Math.max(0, Math.min(1, (e.clientX - box.left) / Math.max(1, box.width)));
  }

  private dragStart(e: PointerEvent, plot: HTMLElement): void {
    if (!this.hist || e.button !== 0) return;
    plot.setPointerCapture(e.pointerId);
    this.dragFrom = this.fraction(e);
    this.showRegion(this.dragFrom, this.dragFrom);
  }

  private dragMove(e: PointerEvent): void {
    const hist = this.hist;
    if (!hist) return;
    const at = this.fraction(e);
    if (this.dragFrom === null) {
      const bin = binAt(hist.counts.length, at);
      this.readout.textContent = `[${formatNumber(hist.edges[bin])}, ${formatNumber(hist.edges[bin + 1])}): ${hist.counts[bin]}`;
      return;
    }
    const range = dragRange(hist, this.dragFrom, at);
    this.showRegion(this.dragFrom, at);
    this.readout.textContent = `${formatNumber(range.lo)} – ${formatNumber(range.hi)}: ${range.count} samples`;
  }

  private dragEnd(e: PointerEvent): void {
    const hist = this.hist;
    const from = this.dragFrom;
    this.dragFrom = null;
    if (!hist || from === null) return;
    const at = this.fraction(e);
    if (Math.abs(at - from) * this.canvas.clientWidth < MIN_DRAG_PX) {
      this.region.hidden = true;
      this.chosen = null;
      return this.updateButtons();
    }
    this.chosen = dragRange(hist, from, at);
    this.updateButtons();
    this.select(this.chosen);
  }

  /** Highlight the bins between plot fractions `a` and `b`. */
  private showRegion(a: number, b: number): void {
    const bins = this.hist?.counts.length ?? 1;
    const first = binAt(bins, Math.min(a, b));
    const last = binAt(bins, Math.max(a, b));
    this.region.hidden = false;
    this.region.style.left = `${(100 * first) / bins}%`;
    this.region.style.width = `${(100 * (last + 1 - first)) / bins}%`;
  }

  private select(range: LossRange): void {
    const key = this.runKey;
    const name = selectionName(this.split, 'loss', range.lo, range.hi);
    const command = { type: 'select', split: this.split, name, loss_min: range.lo, loss_max: range.hi } as const;
    void this.acks.track(key, `select ${name}`, this.hooks.send(command)).then((raw) => {
      const outcome = replyOf('select', raw);
      this.acks.set(key, describeSelection(outcome), outcome.ok ? 'ok' : 'error');
      if (!outcome.ok || key !== this.runKey) return;
      const made = outcome.data.name;
      this.made = this.split === 'train' ? { name: made, size: outcome.data.size } : null;
      this.updateButtons();
      this.hooks.selected(key, made);
    });
  }

  private setZoom(range: { lo: number; hi: number } | null): void {
    this.zoom = range ? { lo: range.lo, hi: range.hi } : null;
    this.chosen = null;
    this.region.hidden = true;
    this.refresh();
  }

  private updateButtons(): void {
    this.zoomButton.disabled = !this.live || this.chosen === null;
    this.resetButton.disabled = !this.live || this.zoom === null;
    this.refreshButton.disabled = !this.live;
    this.forkButton.disabled = !this.live || this.made === null;
  }
}
