/**
 * The split the per-sample panels look at, and the full-split scan of it: Scan evaluates
 * every sample of the split with the current model (at the next batch boundary), its
 * progress comes from the run's `scan_progress` events, Cancel stops it.
 */
import { isCancelled, replyOf, type OutcomeOf } from '../../common/replies';
import type { RunView } from '../../common/state';
import type { ScanProgress } from '../../protocol.gen';
import { formatNumber, h } from '../dom';
import type { SampleSplit } from '../sampleData';
import { AckLines, type Send } from './controls';

export const SPLITS: SampleSplit[] = ['train', 'val', 'test'];

/** One line about a scan's progress, e.g. `scanning val: 512 / 1024 (50 %) · 0.4 s`. */
export function describeScan(progress: ScanProgress | undefined): string {
  if (!progress) return '';
  const elapsed = `${progress.elapsed.toFixed(1)} s`;
  switch (progress.state) {
    case 'running': {
      const of = progress.total ? ` / ${progress.total} (${Math.floor((100 * progress.done) / progress.total)} %)` : '';
      return `scanning ${progress.split}: ${progress.done}${of} · ${elapsed}`;
    }
    case 'done':
      return `scan of ${progress.split} done: ${progress.done} samples in ${elapsed}`;
    case 'cancelled':
      return `scan of ${progress.split} cancelled`;
  }
}

/** What a `scan` reply says. */
export function describeScanReply(split: string, outcome: OutcomeOf<'scan'>): string {
  if (!outcome.ok) return `scan ${split} failed: ${outcome.message} (${outcome.code})`;
  const d = outcome.data;
  if (isCancelled(d)) return `scan ${split}: cancelled`;
  const rate = d.samples_per_s !== null ? `, ${Math.round(d.samples_per_s)} samples/s` : '';
  return `scan ${split}: ${d.size} samples at step ${d.step}${rate}, mean loss ${formatNumber(d.loss_mean)}`;
}

export interface ScanHooks {
  send: Send;
  /** The user chose another split. */
  splitChanged(split: SampleSplit): void;
  /** A scan of `split` of run `runKey` finished (not cancelled). */
  scanned(runKey: string, split: SampleSplit): void;
}

export class ScanBar {
  readonly element = h('div', { class: 'toolbar scan-bar' });
  private readonly splitSelect = h('select', { 'aria-label': 'Split', 'data-testid': 'sample-split' }, ...SPLITS.map((s) => h('option', { value: s }, s)));
  private readonly scanButton = h('button', { 'data-testid': 'scan', title: 'Evaluate every sample of the split with the current model' }, 'Scan');
  private readonly cancelButton = h('button', { class: 'small', 'data-testid': 'scan-cancel', title: 'Stop the running scan' }, 'Cancel');
  private readonly bar = h('progress', { max: 1, value: 0, 'data-testid': 'scan-progress' });
  private readonly progressText = h('span', { class: 'muted scan-text', 'data-testid': 'scan-text' });
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'scan-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private runKey = '';

  constructor(private readonly hooks: ScanHooks) {
    this.splitSelect.addEventListener('change', () => hooks.splitChanged(this.split));
    this.scanButton.addEventListener('click', () => this.scan());
    this.cancelButton.addEventListener('click', () => void this.acks.track(this.runKey, 'cancel', hooks.send({ type: 'cancel' })));
    this.element.append(h('label', { class: 'muted' }, 'Split ', this.splitSelect), this.scanButton, this.cancelButton, this.bar, this.progressText, this.ack);
  }

  get split(): SampleSplit {
    return this.splitSelect.value as SampleSplit;
  }

  render(runKey: string, run: RunView | null, live: boolean): void {
    if (runKey !== this.runKey) {
      this.runKey = runKey;
      this.acks.show(runKey);
    }
    const progress = run?.scans[this.split];
    const running = progress?.state === 'running';
    this.scanButton.disabled = !live || running;
    this.cancelButton.disabled = !live || !running;
    this.bar.hidden = !running;
    this.bar.value = progress?.total ? progress.done / progress.total : 0;
    this.progressText.textContent = describeScan(progress);
  }

  private scan(): void {
    const key = this.runKey;
    const split = this.split;
    this.acks.set(key, `scan ${split}…`, 'pending');
    void this.hooks.send({ type: 'scan', split }).then((raw) => {
      const outcome = replyOf('scan', raw);
      this.acks.set(key, describeScanReply(split, outcome), outcome.ok ? 'ok' : 'error');
      if (outcome.ok && !isCancelled(outcome.data)) this.hooks.scanned(key, split);
    });
  }
}
