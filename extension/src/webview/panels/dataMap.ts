/**
 * The data map of the training split (`data_map`): each sample at its variability (std of
 * the gold-label probability over training, x) and confidence (its mean, y), coloured by
 * correctness. Easy samples sit top left, hard-to-learn ones bottom left, ambiguous ones to
 * the right; the region buttons turn a region into a named selection (`select` with
 * `region` and the share of samples it takes; "likely mislabeled" takes the run's estimate
 * of how many), and a box dragged on the map selects the samples inside it (`select` with
 * its confidence and variability bounds). Fork… trains a copy of the model on the last one.
 *
 * The region picked last stays highlighted; hovering a point shows its numbers and the
 * sample itself. Colours go from orange (often wrong) to blue (always right): told apart with
 * every common colour-vision deficiency.
 */
import type { CommandBody } from '../../common/messages';
import { formatNumber, h } from '../dom';
import { PALETTE } from '../palette';
import { PreviewCache, previewElement } from '../samplePreview';
import { replyOf } from '../../common/replies';
import { dataMapCloud, selectionName, type PointCloud } from '../sampleData';
import { cssRgb, MARGIN, ramp, type Extent } from '../scatter';
import { ScatterView } from '../scatterView';
import { AckLines, type Send } from './controls';
import { describeSelection, type ForkOpener } from './selections';

export type Region = 'easy' | 'ambiguous' | 'hard' | 'mislabeled';
export const REGIONS: Region[] = ['easy', 'ambiguous', 'hard', 'mislabeled'];
const REGION_LABELS: Record<Region, string> = { easy: 'easy', ambiguous: 'ambiguous', hard: 'hard', mislabeled: 'likely mislabeled' };
/** Drags shorter than this many CSS pixels are clicks, not boxes. */
const MIN_BOX = 4;

export interface Box {
  confidence_min: number;
  confidence_max: number;
  variability_min: number;
  variability_max: number;
}

/**
 * The data-map bounds of a box dragged from `a` to `b` (CSS pixels from the canvas' top
 * left) on a canvas of `size` drawn with `extent`, clamped to the plot and to [0, 1];
 * `null` for a drag too small to be a box.
 */
export function boxFromDrag(a: { x: number; y: number }, b: { x: number; y: number }, size: { width: number; height: number }, extent: Extent): Box | null {
  if (Math.abs(a.x - b.x) < MIN_BOX || Math.abs(a.y - b.y) < MIN_BOX) return null;
  const width = Math.max(1, size.width - MARGIN.left - MARGIN.right);
  const height = Math.max(1, size.height - MARGIN.top - MARGIN.bottom);
  const clamp = (v: number): number => Math.min(1, Math.max(0, v));
  const xAt = (px: number): number => clamp(extent.x0 + ((px - MARGIN.left) / width) * (extent.x1 - extent.x0));
  const yAt = (py: number): number => clamp(extent.y0 + ((MARGIN.top + height - py) / height) * (extent.y1 - extent.y0));
  const round = (v: number): number => Number(v.toPrecision(4));
  const [x0, x1] = [xAt(a.x), xAt(b.x)].sort((p, q) => p - q);
  const [y0, y1] = [yAt(a.y), yAt(b.y)].sort((p, q) => p - q);
  return { confidence_min: round(y0), confidence_max: round(y1), variability_min: round(x0), variability_max: round(x1) };
}
/** Points asked for: more than a plot has pixels; the session subsamples deterministically. */
export const DATA_MAP_POINTS = 50_000;

/** The share of samples a region takes, from the field's text; an error says what is wrong. */
export function parseFraction(text: string): { fraction: number } | { error: string } {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0 || value > 1) {
    return { error: `region share "${text}" is not a number in (0, 1]` };
  }
  return { fraction: value };
}

/** Samples of a picked region highlighted at most (one `selection_rows` page). */
export const MAX_PICKED = 10_000;

export function dataMapCaption(cloud: PointCloud): string {
  const shown = cloud.points.x.length < cloud.total ? `${cloud.points.x.length} of ${cloud.total}` : `${cloud.total}`;
  return `${shown} samples · training statistics at step ${cloud.step}`;
}

export interface DataMapHooks {
  send: Send;
  selected(runKey: string, name: string): void;
  fork: ForkOpener;
}

export class DataMapPanel {
  readonly element = h('section', { class: 'panel data-map', 'aria-label': 'Data map' });
  private readonly view = new ScatterView({
    testId: 'data-map',
    xLabel: 'variability',
    yLabel: 'confidence',
    legend: ['wrong', 'gradient-correct', 'correct'],
    coloring: () => ({
      table: ramp(cssRgb(PALETTE[1], [230, 159, 0]), cssRgb(PALETTE[0], [86, 180, 233]), 16),
      lo: 0,
      hi: 1,
      missing: 0xff9d9d9d,
    }),
    hover: (cloud, i) => this.describe(cloud, i),
    extent: (cloud) => {
      let top = 0.05;
      for (const v of cloud.points.x) if (v > top) top = v;
      return { x0: 0, x1: top * 1.05, y0: 0, y1: 1 };
    },
  });
  private readonly fraction = h('input', { type: 'number', min: 0.01, max: 1, step: 0.01, value: 0.33, class: 'fraction', 'aria-label': 'Region share', title: 'Share of the samples a region takes' });
  private readonly buttons = new Map<Region, HTMLButtonElement>();
  private readonly refreshButton = h('button', { class: 'small', title: 'Ask the run again' }, 'Refresh');
  private readonly forkButton = h('button', { class: 'small', 'data-testid': 'data-map-fork', title: 'Train a copy of the model on the selected region' }, 'Fork…');
  /** The region selection made last. */
  private made: { name: string; size: number } | null = null;
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'data-map-ack', 'aria-live': 'polite' });
  private readonly boxOverlay = h('div', { class: 'plot-box', hidden: true });
  private dragFrom: { x: number; y: number } | null = null;
  private readonly acks = new AckLines(this.ack);
  private runKey = '';
  private live = false;
  private ticket = 0;
  private emptyText = '';
  private previews: PreviewCache;

  constructor(private readonly hooks: DataMapHooks) {
    this.previews = new PreviewCache((command) => hooks.send(command), 'train', 64);
    const bar = h('div', { class: 'toolbar' });
    for (const region of REGIONS) {
      const title = region === 'mislabeled' ? 'Select the samples most likely mislabeled (the lowest confidence; as many as the run estimates)' : `Select the ${region} samples`;
      const button = h('button', { class: 'small', 'data-region': region, title }, REGION_LABELS[region]);
      button.addEventListener('click', () => this.select(region));
      this.buttons.set(region, button);
      bar.append(button);
    }
    bar.append(h('label', { class: 'muted' }, 'share ', this.fraction), this.refreshButton, this.forkButton);
    this.refreshButton.addEventListener('click', () => this.refresh());
    this.forkButton.addEventListener('click', () => this.made && this.hooks.fork(this.runKey, this.made.name, this.made.size));
    this.element.append(h('h3', {}, 'Data map (train)'), bar, this.view.element, this.ack);
    this.view.canvas.parentElement?.append(this.boxOverlay);
    this.view.canvas.title = 'Drag a box to select the samples inside it';
    this.view.canvas.addEventListener('pointerdown', (e) => this.startBox(e));
    this.view.canvas.addEventListener('pointermove', (e) => this.moveBox(e));
    this.view.canvas.addEventListener('pointerup', (e) => this.endBox(e));
  }

  private at(e: PointerEvent): { x: number; y: number } {
    const rect = this.view.canvas.getBoundingClientRect();
    return { x: e.clientX - rect.left, y: e.clientY - rect.top };
  }

  private startBox(e: PointerEvent): void {
    if (!this.live || !this.view.extent) return;
    this.dragFrom = this.at(e);
    this.view.canvas.setPointerCapture(e.pointerId);
  }

  private moveBox(e: PointerEvent): void {
    if (!this.dragFrom) return;
    const to = this.at(e);
    const style = this.boxOverlay.style;
    style.left = `${Math.min(this.dragFrom.x, to.x)}px`;
    style.top = `${Math.min(this.dragFrom.y, to.y)}px`;
    style.width = `${Math.abs(to.x - this.dragFrom.x)}px`;
    style.height = `${Math.abs(to.y - this.dragFrom.y)}px`;
    this.boxOverlay.hidden = false;
  }

  private endBox(e: PointerEvent): void {
    const from = this.dragFrom;
    this.dragFrom = null;
    this.boxOverlay.hidden = true;
    const extent = this.view.extent;
    if (!from || !extent) return;
    const canvas = this.view.canvas;
    const box = boxFromDrag(from, this.at(e), { width: canvas.clientWidth, height: canvas.clientHeight }, extent);
    if (!box) return;
    const name = selectionName('train', 'box', box.confidence_min, box.confidence_max, box.variability_min, box.variability_max);
    this.send(name, { type: 'select', split: 'train', source: 'training', name, ...box });
  }

  show(runKey: string, live: boolean): void {
    this.live = live;
    for (const button of [...this.buttons.values(), this.refreshButton]) button.disabled = !live;
    this.forkButton.disabled = !live || this.made === null;
    if (runKey === this.runKey) return;
    this.runKey = runKey;
    this.ticket++; // an answer still on its way is for the run shown before
    this.previews = new PreviewCache((command) => this.hooks.send(command), 'train', 64);
    this.made = null;
    this.forkButton.disabled = true;
    this.acks.show(runKey);
    this.view.highlight(null);
    this.view.set(null, this.emptyText);
    this.refresh();
  }

  /** What the panel says while it has no map (`''`: nothing). */
  setEmpty(text: string): void {
    if (text === this.emptyText) return;
    this.emptyText = text;
    if (this.view.canvas.dataset.points === '') this.view.caption.textContent = text;
  }

  /** Highlight the samples of selection `name` (its first MAX_PICKED by index). */
  private async pick(name: string): Promise<void> {
    const key = this.runKey;
    const outcome = replyOf('selection_rows', await this.hooks.send({ type: 'selection_rows', name, offset: 0, limit: MAX_PICKED, sort: 'index', descending: false }));
    if (key !== this.runKey || !outcome.ok) return;
    this.view.highlight(new Set(outcome.data.rows.map((r) => r.index)));
  }

  /** The tooltip of point `i`: its numbers, then the sample (fetched on first hover). */
  private describe(cloud: PointCloud, i: number): HTMLElement {
    const index = cloud.points.index[i];
    const slot = h('div', { class: 'tip-preview' }, previewElement(this.previews.get(index), 64));
    const numbers = `#${index} · confidence ${formatNumber(cloud.points.y[i], 3)} · variability ${formatNumber(cloud.points.x[i], 3)} · correct ${formatNumber(cloud.points.value[i], 2)}`;
    const cache = this.previews;
    if (!cache.get(index)) void cache.fetch([index]).then(() => slot.replaceChildren(previewElement(cache.get(index), 64)));
    return h('div', {}, h('div', { class: 'tip-numbers' }, numbers), slot);
  }

  refresh(): void {
    if (!this.runKey || !this.live) return;
    const ticket = ++this.ticket;
    void this.hooks.send({ type: 'data_map', split: 'train', max_points: DATA_MAP_POINTS }).then((raw) => {
      if (ticket !== this.ticket) return;
      const outcome = replyOf('data_map', raw);
      if (!outcome.ok) return this.view.set(null, `No data map yet: ${outcome.message}`);
      const cloud = dataMapCloud(outcome.data);
      this.view.set(cloud, dataMapCaption(cloud));
    });
  }

  private select(region: Region): void {
    const key = this.runKey;
    const name = selectionName('train', region);
    if (region === 'mislabeled') return this.send(name, { type: 'select', split: 'train', source: 'training', name, region });
    const parsed = parseFraction(this.fraction.value);
    if ('error' in parsed) return this.acks.set(key, parsed.error, 'error');
    this.send(name, { type: 'select', split: 'train', source: 'training', name, region, fraction: parsed.fraction });
  }

  private send(name: string, command: CommandBody): void {
    const key = this.runKey;
    void this.acks.track(key, `select ${name}`, this.hooks.send(command)).then((raw) => {
      const outcome = replyOf('select', raw);
      this.acks.set(key, describeSelection(outcome), outcome.ok ? 'ok' : 'error');
      if (!outcome.ok || key !== this.runKey) return;
      const made = outcome.data.name;
      this.made = { name: made, size: outcome.data.size };
      this.forkButton.disabled = !this.live;
      this.hooks.selected(key, made);
      void this.pick(made);
    });
  }
}
