/**
 * The forks section of a run: the progress of the fork in training (from its child run's
 * `fork_progress` events) with Cancel, the lineage graph, the side-by-side comparison and
 * merges. Forks start from the fork dialog, which the per-sample panels open on a
 * selection. Everything here acts on the top-level run: selecting one of its forks in the
 * picker still shows the run's lineage, with that fork highlighted.
 */
import type { CommandBody, Outcome } from '../../common/messages';
import type { Pill, RunView } from '../../common/state';
import type { ForkProgress } from '../../protocol.gen';
import { h } from '../dom';
import { replyOf } from '../../common/replies';
import type { LineageView } from '../../protocol.gen';
import { describeCancel, describeFork, describeForkProgress } from '../forkText';
import { ComparePanel } from './comparePanel';
import { AckLines } from './controls';
import { ForkDialog, type ForkTarget } from './forkDialog';
import { LineageGraph } from './lineageGraph';
import { MergePanel } from './mergePanel';
import { isLive, needsRefresh } from './samples';

export interface ForksHooks {
  /** Send `command` to run `runKey`. */
  send(runKey: string, command: CommandBody): Promise<Outcome>;
  /** Show run `run` of the session of `runKey`. */
  select(runKey: string, run: string): void;
}

/** What the section draws: the top-level run, its child runs, the run the picker shows. */
export interface ForksView {
  key: string;
  run: RunView | null;
  pill: Pill | null;
  children: RunView[];
  selected: string;
}

/** The latest fork progress among `children` (the newest event wins). */
export function latestProgress(children: RunView[]): ForkProgress | null {
  let latest: ForkProgress | null = null;
  for (const child of children) if (child.fork && (!latest || child.fork.seq > latest.seq)) latest = child.fork;
  return latest;
}

export class ForksSection {
  readonly element: HTMLElement;
  private readonly dialog: ForkDialog;
  private readonly bar = h('progress', { max: 1, value: 0, 'data-testid': 'fork-progress', hidden: true });
  private readonly progressText = h('span', { class: 'muted scan-text', 'data-testid': 'fork-text' });
  private readonly cancelButton = h('button', { class: 'small', 'data-testid': 'fork-cancel', title: 'Stop the fork, comparison or merge in progress' }, 'Cancel');
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'fork-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private readonly graph: LineageGraph;
  private readonly compare: ComparePanel;
  private readonly merge: MergePanel;
  /** Lineages fetched with `lineage` (until the run publishes one). */
  private readonly fetched = new Map<string, LineageView>();
  /** Commands in progress per run (Cancel can stop them). */
  private readonly pending = new Map<string, number>();
  private last: { key: string; pill: Pill | null } = { key: '', pill: null };
  private view: ForksView = { key: '', run: null, pill: null, children: [], selected: '' };

  constructor(private readonly hooks: ForksHooks) {
    const send = (key: string, command: CommandBody): Promise<Outcome> => this.send(key, command);
    this.dialog = new ForkDialog((key, command) => void this.fork(key, command));
    this.graph = new LineageGraph({ select: (run) => hooks.select(this.view.key, run), refresh: () => this.fetchLineage(this.view.key) });
    this.compare = new ComparePanel({ send });
    this.merge = new MergePanel({ send });
    this.cancelButton.addEventListener('click', () => void this.cancel());
    this.element = h(
      'section',
      { class: 'forks', 'aria-label': 'Forks and merges' },
      h('h2', {}, 'Forks & merges'),
      h('div', { class: 'toolbar scan-bar' }, this.bar, this.progressText, this.cancelButton, this.ack),
      h('div', { class: 'fork-grid' }, this.graph.element, h('div', { class: 'fork-side' }, this.compare.element, this.merge.element)),
      this.dialog.element,
    );
  }

  /** Open the fork dialog on a selection of `target.runKey` (a top-level run). */
  openFork(target: ForkTarget): void {
    this.dialog.open(target, target.runKey === this.view.key && this.view.pill === 'paused');
  }

  render(view: ForksView): void {
    this.view = view;
    const { key, pill } = view;
    const live = isLive(pill);
    const refresh = needsRefresh(this.last, key, pill) || (key !== this.last.key && live);
    if (key !== this.last.key) this.acks.show(key);
    this.last = { key, pill };
    if (refresh) this.fetchLineage(key);
    const lineage = this.lineage();
    const progress = latestProgress(view.children);
    const running = progress?.state === 'running';
    this.bar.hidden = !running;
    this.bar.value = running && progress.total ? progress.step / progress.total : 0;
    if (running && !progress.total) this.bar.removeAttribute('value');
    this.progressText.textContent = describeForkProgress(progress);
    this.cancelButton.disabled = !live || (!running && !this.pending.get(key));
    if (this.dialog.runKey === key) this.dialog.setPaused(pill === 'paused');
    this.graph.render(key, lineage, view.selected, live);
    this.compare.render(key, live);
    this.merge.render(key, lineage, live, pill === 'paused');
  }

  /** The run's lineage: the latest it published, else the one fetched. */
  private lineage(): LineageView | null {
    const event = this.view.run?.lineage;
    if (event) return { active: event.active, nodes: event.nodes, edges: event.edges };
    return this.fetched.get(this.view.key) ?? null;
  }

  private fetchLineage(key: string): void {
    if (!key || !isLive(this.view.pill)) return;
    void this.hooks.send(key, { type: 'lineage' }).then((raw) => {
      const outcome = replyOf('lineage', raw);
      if (!outcome.ok) return;
      this.fetched.set(key, outcome.data);
      if (key === this.view.key) this.render(this.view);
    });
  }

  private async fork(key: string, command: CommandBody): Promise<void> {
    const label = 'selection' in command ? `fork on ${String(command.selection)}` : 'fork';
    const outcome = replyOf('fork', await this.acks.track(key, label, this.send(key, command)));
    this.acks.set(key, describeFork(outcome), outcome.ok && outcome.data.status === 'done' ? 'ok' : 'error');
  }

  private async cancel(): Promise<void> {
    const key = this.view.key;
    const outcome = replyOf('cancel', await this.hooks.send(key, { type: 'cancel' }));
    // The stopped command's own answer follows and replaces this line (unless it came first).
    const stopped = outcome.ok && outcome.data.cancelled;
    if (!stopped || this.pending.get(key)) this.acks.set(key, describeCancel(outcome), outcome.ok ? 'pending' : 'error');
  }

  /** Send, counting the command as in progress until it is answered. */
  private async send(key: string, command: CommandBody): Promise<Outcome> {
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    if (key === this.view.key) this.render(this.view);
    try {
      return await this.hooks.send(key, command);
    } finally {
      this.pending.set(key, (this.pending.get(key) ?? 1) - 1);
      if (key === this.view.key) this.render(this.view);
    }
  }
}
