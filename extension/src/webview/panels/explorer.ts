/**
 * The data explorer: a 2-D projection (UMAP, else PCA) of the embeddings of the latest scan
 * of a split (`explorer`), each sample coloured by its loss (blue low, yellow high: readable
 * with every common colour-vision deficiency); hovering a point shows its loss and the sample.
 * Projecting can take a while on a large split, so it runs when asked (Project), never on its
 * own.
 */
import { formatNumber, h } from '../dom';
import { PALETTE } from '../palette';
import { PreviewCache, previewElement } from '../samplePreview';
import { replyOf } from '../../common/replies';
import { explorerCloud, type PointCloud, type SampleSplit } from '../sampleData';
import { cssRgb, quantile, ramp } from '../scatter';
import { ScatterView } from '../scatterView';
import { AckLines, type Send } from './controls';
import { DATA_MAP_POINTS } from './dataMap';

export function explorerCaption(cloud: PointCloud): string {
  const shown = cloud.points.x.length < cloud.total ? `${cloud.points.x.length} of ${cloud.total}` : `${cloud.total}`;
  return `${shown} samples of ${cloud.split} · ${cloud.method ?? ''} of the scan at step ${cloud.step}`;
}

/** What the explorer says before its first projection of `split`. */
export function explorerHint(split: SampleSplit, scanned: boolean): string {
  return scanned ? `The ${split} split is scanned: Project draws its embeddings.` : `Scan ${split} first (above), then Project.`;
}

export class ExplorerPanel {
  readonly element = h('section', { class: 'panel explorer', 'aria-label': 'Data explorer' });
  private readonly view = new ScatterView({
    testId: 'explorer',
    xLabel: '',
    yLabel: '',
    legend: ['low loss', 'gradient-loss', 'high loss'],
    // Losses are skewed: the top 1 % share the end colour, so the rest keep their contrast.
    coloring: (cloud) => ({
      table: ramp(cssRgb(PALETTE[6], [0, 114, 178]), cssRgb(PALETTE[5], [240, 228, 66]), 32),
      lo: quantile(cloud.points.value, 0.01),
      hi: quantile(cloud.points.value, 0.99),
      missing: 0xff9d9d9d,
    }),
    hover: (cloud, i) => this.describe(cloud, i),
  });
  private readonly method = h('select', { 'aria-label': 'Projection' }, ...['auto', 'umap', 'pca'].map((m) => h('option', { value: m }, m)));
  private readonly projectButton = h('button', { class: 'small', 'data-testid': 'explorer-project', title: 'Project the embeddings of the latest scan of the split' }, 'Project');
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'explorer-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private runKey = '';
  private split: SampleSplit = 'train';
  private ticket = 0;
  private projected = false;
  private previews: PreviewCache;

  constructor(private readonly send: Send) {
    this.previews = new PreviewCache(send, 'train', 64);
    this.projectButton.addEventListener('click', () => this.project());
    this.element.append(h('h3', {}, 'Explorer'), h('div', { class: 'toolbar' }, this.method, this.projectButton), this.view.element, this.ack);
  }

  show(runKey: string, split: SampleSplit, live: boolean): void {
    this.projectButton.disabled = !live;
    if (runKey === this.runKey && split === this.split) return;
    this.runKey = runKey;
    this.split = split;
    this.ticket++;
    this.projected = false;
    this.previews = new PreviewCache(this.send, split, 64);
    this.acks.show(runKey);
    this.view.set(null, explorerHint(split, false));
  }

  /** A scan of `split` finished: the hint says Project can draw it now. */
  scanned(split: SampleSplit): void {
    if (split === this.split && !this.projected) this.view.set(null, explorerHint(split, true));
  }

  private project(): void {
    const key = this.runKey;
    const ticket = ++this.ticket;
    const command = { type: 'explorer', split: this.split, method: this.method.value as 'auto' | 'umap' | 'pca', max_points: DATA_MAP_POINTS } as const;
    void this.acks.track(key, `project ${this.split}`, this.send(command)).then((raw) => {
      const outcome = replyOf('explorer', raw);
      if (!outcome.ok || ticket !== this.ticket) return;
      this.acks.set(key, '', 'ok');
      this.projected = true;
      const cloud = explorerCloud(outcome.data);
      this.view.set(cloud, explorerCaption(cloud));
    });
  }

  private describe(cloud: PointCloud, i: number): HTMLElement {
    const index = cloud.points.index[i];
    const cache = this.previews;
    const slot = h('div', { class: 'tip-preview' }, previewElement(cache.get(index), 64));
    if (!cache.get(index)) void cache.fetch([index]).then(() => slot.replaceChildren(previewElement(cache.get(index), 64)));
    return h('div', {}, h('div', { class: 'tip-numbers' }, `#${index} · loss ${formatNumber(cloud.points.value[i], 4)}`), slot);
  }
}
