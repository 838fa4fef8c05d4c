/**
 * The per-sample section of the selected run: the split and its scan, the loss histogram,
 * the data map, the sample table and the explorer, wired together. A selection made in the
 * histogram or the data map opens in the table; a finished scan redraws the histogram and
 * the explorer's hint; the views are fetched again when the run pauses, after a merge or a
 * load, and every few seconds while the run trains and the section is shown.
 *
 * Every command of the section goes to the run the section shows, and every panel drops an
 * answer that comes back for a run it no longer shows: nothing of one run appears under
 * another. A train selection of any view can be forked on (the fork dialog).
 */
import type { CommandBody, Outcome, PathPurpose } from '../../common/messages';
import type { Pill, RunView } from '../../common/state';
import { h } from '../dom';
import type { Send } from './controls';
import { DataMapPanel } from './dataMap';
import { ExplorerPanel } from './explorer';
import { LossHistogramPanel } from './lossHistogram';
import { SampleTable } from './sampleTable';
import type { ForkOpener } from './selections';
import { ScanBar } from './scanBar';

export interface SamplesHooks {
  /** Send `command` to run `runKey`. */
  send(runKey: string, command: CommandBody): Promise<Outcome>;
  /** Draw again (the split changed). */
  changed(): void;
  choosePath?: (purpose: PathPurpose, suggested: string) => Promise<string | null>;
  /** Open the fork dialog on train selection `name` (`size` samples) of run `runKey`. */
  fork: ForkOpener;
}

/** Seconds between two refreshes of the histogram and the data map while a run trains. */
export const TRAINING_REFRESH_MS = 5000;

/** Whether the views should be fetched again: another run, or a run that became live or paused. */
export function needsRefresh(before: { key: string; pill: Pill | null }, key: string, pill: Pill | null): boolean {
  if (key !== before.key || pill === before.pill) return false;
  return pill === 'paused' || !isLive(before.pill);
}

export function isLive(pill: Pill | null): boolean {
  return pill !== null && pill !== 'disconnected' && pill !== 'finished';
}

/** What the views say of a run whose process has ended. */
export const ENDED_TEXT =
  'This run has ended: its per-sample data lived in its training process and is not kept in its history. ' +
  'While a run trains, these views fill from every training step; Scan evaluates a whole split.';

export class SamplesSection {
  readonly element: HTMLElement;
  private readonly scanBar: ScanBar;
  private readonly histogram: LossHistogramPanel;
  private readonly dataMap: DataMapPanel;
  private readonly table: SampleTable;
  private readonly explorer: ExplorerPanel;
  private last: { key: string; pill: Pill | null } = { key: '', pill: null };
  private lastRefresh = 0;

  constructor(hooks: SamplesHooks) {
    // Bound to the run the section shows when the command leaves, never to a later one.
    const send: Send = (command) => hooks.send(this.last.key, command);
    const selected = (key: string, name: string): void => {
      if (key === this.last.key) void this.table.listSelections(name);
    };
    this.scanBar = new ScanBar({
      send,
      splitChanged: () => hooks.changed(),
      scanned: (key, split) => {
        if (key !== this.last.key || split !== this.scanBar.split) return;
        this.histogram.refresh();
        this.explorer.scanned(split);
      },
    });
    this.histogram = new LossHistogramPanel({ send, selected, fork: hooks.fork });
    this.dataMap = new DataMapPanel({ send, selected, fork: hooks.fork });
    const choosePath = hooks.choosePath;
    this.table = new SampleTable({ send, chooseFolder: choosePath && (() => choosePath('folder', '')), fork: hooks.fork });
    this.explorer = new ExplorerPanel(send);
    this.element = h(
      'section',
      { class: 'samples', 'aria-label': 'Samples' },
      this.scanBar.element,
      h('div', { class: 'sample-grid' }, this.histogram.element, this.dataMap.element, this.table.element, this.explorer.element),
    );
  }

  /**
   * Args: `visible` whether the section is on screen (training-time refreshes only then).
   */
  render(key: string, run: RunView | null, pill: Pill | null, visible = true): void {
    const live = isLive(pill);
    const split = this.scanBar.split;
    const refresh = needsRefresh(this.last, key, pill);
    this.last = { key, pill };
    this.scanBar.render(key, run, live);
    this.histogram.show(key, split, live);
    this.dataMap.show(key, live);
    this.table.show(key, live);
    this.explorer.show(key, split, live);
    const ended = run !== null && !live;
    this.histogram.setEmpty(ended ? ENDED_TEXT : '');
    this.dataMap.setEmpty(ended ? ENDED_TEXT : '');
    const now = performance.now();
    const training = pill === 'running' && visible && now - this.lastRefresh > TRAINING_REFRESH_MS;
    if (refresh || training) this.refreshViews(refresh);
  }

  /** Fetch the views of run `key` again (after a merge or a load), if it is the one shown. */
  refresh(key: string): void {
    if (key === this.last.key) this.refreshViews(true);
  }

  private refreshViews(selections: boolean): void {
    this.lastRefresh = performance.now();
    this.histogram.refresh();
    this.dataMap.refresh();
    if (selections) void this.table.listSelections(null);
  }
}
