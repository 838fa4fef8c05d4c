/**
 * The per-sample section of the selected run: the split and its scan, the loss histogram,
 * the data map, the sample table and the explorer, wired together. A selection made in the
 * histogram or the data map opens in the table; a finished scan redraws the histogram; the
 * views are fetched again when the run pauses (its statistics then hold still). A train
 * selection of any of them can be forked on (the fork dialog).
 */
import type { PathPurpose } from '../../common/messages';
import type { Pill, RunView } from '../../common/state';
import { h } from '../dom';
import type { Send } from './controls';
import { DataMapPanel } from './dataMap';
import { ExplorerPanel } from './explorer';
import { LossHistogramPanel } from './lossHistogram';
import { SampleTable } from './sampleTable';
import { ScanBar } from './scanBar';

export interface SamplesHooks {
  send: Send;
  /** Draw again (the split changed). */
  changed(): void;
  choosePath?: (purpose: PathPurpose, suggested: string) => Promise<string | null>;
  /** Open the fork dialog on train selection `name` (`size` samples) of run `runKey`. */
  fork: ForkOpener;
}

export type ForkOpener = (runKey: string, name: string, size: number | null) => void;

/** Whether the views should be fetched again: another run, or a run that became live or paused. */
export function needsRefresh(before: { key: string; pill: Pill | null }, key: string, pill: Pill | null): boolean {
  if (key !== before.key || pill === before.pill) return false;
  return pill === 'paused' || !isLive(before.pill);
}

export function isLive(pill: Pill | null): boolean {
  return pill !== null && pill !== 'disconnected' && pill !== 'finished';
}

export class SamplesSection {
  readonly element: HTMLElement;
  private readonly scanBar: ScanBar;
  private readonly histogram: LossHistogramPanel;
  private readonly dataMap: DataMapPanel;
  private readonly table: SampleTable;
  private readonly explorer: ExplorerPanel;
  private last: { key: string; pill: Pill | null } = { key: '', pill: null };

  constructor(hooks: SamplesHooks) {
    const selected = (key: string, name: string): void => {
      if (key === this.last.key) void this.table.listSelections(name);
    };
    this.scanBar = new ScanBar({
      send: hooks.send,
      splitChanged: () => hooks.changed(),
      scanned: (key, split) => key === this.last.key && split === this.scanBar.split && this.histogram.refresh(),
    });
    this.histogram = new LossHistogramPanel({ send: hooks.send, selected, fork: hooks.fork });
    this.dataMap = new DataMapPanel({ send: hooks.send, selected, fork: hooks.fork });
    const choosePath = hooks.choosePath;
    this.table = new SampleTable({ send: hooks.send, chooseFolder: choosePath && (() => choosePath('folder', '')), fork: hooks.fork });
    this.explorer = new ExplorerPanel(hooks.send);
    this.element = h(
      'section',
      { class: 'samples', 'aria-label': 'Samples' },
      h('h2', {}, 'Samples'),
      this.scanBar.element,
      h('div', { class: 'sample-grid' }, this.histogram.element, this.dataMap.element, this.table.element, this.explorer.element),
    );
  }

  render(key: string, run: RunView | null, pill: Pill | null): void {
    const live = isLive(pill);
    const split = this.scanBar.split;
    const refresh = needsRefresh(this.last, key, pill);
    this.last = { key, pill };
    this.scanBar.render(key, run, live);
    this.histogram.show(key, split, live);
    this.dataMap.show(key, live);
    this.table.show(key, live);
    this.explorer.show(key, split, live);
    if (refresh) {
      this.histogram.refresh();
      this.dataMap.refresh();
      void this.table.listSelections(null);
    }
  }
}
