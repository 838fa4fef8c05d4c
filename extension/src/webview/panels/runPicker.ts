/**
 * The list of every run the page knows, live ones first, each with its status pill and its
 * alerts. Child runs (forks, merges) come right under the run they were made from, indented
 * and labelled with what they are. The box before a run adds it to the runs compared on the
 * charts (its colour there shows in the box).
 */
import type { LineageNode, RunInfo } from '../../protocol.gen';
import { pill, type DashboardState, type Pill, type RunView, type SourceView } from '../../common/state';
import { fill, h } from '../dom';

export interface RunRef {
  source: string;
  run: string;
}

export interface RunEntry {
  ref: RunRef;
  name: string;
  project: string;
  pill: Pill;
  startedAt: number;
  /** 0 for a top-level run, 1 for its forks and merges, ... */
  depth: number;
  /** The second line: project and session, or what a child run is. */
  label: string;
  /** The alerts raised and not cleared. */
  alerts: RunInfo['alerts'];
  /** Whether its session ended for good (its process is gone). */
  ended: boolean;
}

/**
 * Top-level runs, live ones (newest first) before finished or disconnected ones (newest
 * first), each followed by its child runs in the order they were made.
 */
export function listRuns(state: DashboardState): RunEntry[] {
  const roots: { source: SourceView; run: RunView; pill: Pill }[] = [];
  const children = new Map<string, RunView[]>();
  for (const source of Object.values(state.sources)) {
    for (const run of Object.values(source.runs)) {
      const parent = run.info.parent;
      if (parent !== null && parent !== run.info.run && source.runs[parent]) {
        const key = `${source.key}\u0000${parent}`;
        children.set(key, [...(children.get(key) ?? []), run]);
      } else roots.push({ source, run, pill: pill(source, run) });
    }
  }
  const live = (p: Pill): number => (p === 'finished' || p === 'disconnected' ? 1 : 0);
  roots.sort((a, b) => live(a.pill) - live(b.pill) || b.run.info.started_at - a.run.info.started_at);
  const entries: RunEntry[] = [];
  const add = (source: SourceView, run: RunView, depth: number, lineage: LineageNode[]): void => {
    const info = run.info;
    const parent = source.runs[info.parent ?? '']?.info.name ?? '';
    // Where a top-level run comes from: its session (pid and port), or the hub's exported file.
    const where = source.key.startsWith('file-') ? source.label : source.key;
    const label = depth === 0 ? `${info.project} · ${where}` : childLabel(lineage.find((n) => n.run === info.run), lineage, parent);
    entries.push({
      ref: { source: source.key, run: info.run },
      name: info.name,
      project: info.project,
      pill: pill(source, run),
      startedAt: info.started_at,
      depth,
      label,
      alerts: info.alerts,
      ended: source.ended,
    });
    const kids = (children.get(`${source.key}\u0000${info.run}`) ?? []).sort((a, b) => a.info.started_at - b.info.started_at);
    for (const kid of kids) if (depth < 8) add(source, kid, depth + 1, lineage);
  };
  for (const root of roots) add(root.source, root.run, 0, root.run.lineage?.nodes ?? []);
  return entries;
}

/**
 * What a child run is, e.g. `fork of mlp @ 836`, `fork of merge-1 @ 900 · cancelled` or
 * `soup merge @ 836`, from its lineage node (`parent`: the run's parent's name, without one).
 */
export function childLabel(node: LineageNode | undefined, nodes: LineageNode[], parent: string): string {
  if (!node) return `child of ${parent}`;
  const at = node.parent_step !== null ? ` @ ${node.parent_step}` : '';
  if (node.kind === 'merge') return `${node.method ?? ''} merge${node.status === 'discarded' ? ' (discarded)' : ''}${at}`.trim();
  const from = nodes.find((n) => n.run === node.parent)?.name ?? parent;
  const ended = node.status === 'cancelled' || node.status === 'failed' ? ` · ${node.status}` : '';
  return `fork of ${from}${at}${ended}`;
}

/** The top-level run `ref` was made from (itself when it has no known parent). */
export function rootRun(state: DashboardState, ref: RunRef): RunRef {
  const runs = state.sources[ref.source]?.runs ?? {};
  let run = ref.run;
  for (let hops = 0; hops < 8; hops++) {
    const parent = runs[run]?.info.parent;
    if (parent === null || parent === undefined || parent === run || !runs[parent]) break;
    run = parent;
  }
  return { source: ref.source, run };
}

export function sameRun(a: RunRef | null, b: RunRef | null): boolean {
  return a !== null && b !== null && a.source === b.source && a.run === b.run;
}

export function pillElement(value: Pill): HTMLElement {
  return h('span', { class: `pill pill-${value}`, 'data-testid': 'pill' }, value);
}

export interface PickerHooks {
  select(ref: RunRef): void;
  /** Add run `ref` to the runs compared on the charts, or take it out. */
  compare(ref: RunRef, on: boolean): void;
}

export class RunPicker {
  readonly element = h('nav', { class: 'run-picker', 'aria-label': 'Runs' });
  private signature = '';

  constructor(private readonly hooks: PickerHooks) {}

  /** Args: `colors` the chart colour of each run compared, by its key (`keyOf`). */
  render(entries: RunEntry[], selected: RunRef | null, colors: ReadonlyMap<string, string>, keyOf: (ref: RunRef) => string): void {
    const signature = JSON.stringify([entries.map((e) => [e.ref, e.name, e.pill, e.label, e.alerts]), selected, [...colors]]);
    if (signature === this.signature) return;
    this.signature = signature;
    if (entries.length === 0) {
      fill(this.element, h('p', { class: 'muted' }, 'Waiting for a training run… Start a script that uses OnTheFly; it appears here.'));
      return;
    }
    fill(
      this.element,
      ...entries.map((entry) => {
        const color = colors.get(keyOf(entry.ref));
        const box = h('input', { type: 'checkbox', class: 'compare-box', checked: color !== undefined, 'data-testid': 'compare-run', 'aria-label': `Compare ${entry.name} on the charts`, title: 'Compare on the charts' });
        if (color) box.style.accentColor = color;
        box.addEventListener('change', () => this.hooks.compare(entry.ref, box.checked));
        const button = h(
          'button',
          {
            class: entry.depth ? 'run child-run' : 'run',
            'data-testid': 'run',
            'data-depth': entry.depth,
            'aria-pressed': sameRun(entry.ref, selected) ? 'true' : 'false',
            title: `${entry.project}/${entry.name} (${entry.label.split(' · ').pop() ?? entry.ref.source})`,
          },
          h('span', { class: 'run-name' }, entry.name),
          // Two processes may run the same project and name: the session tells them apart.
          h('span', { class: 'run-project muted' }, entry.label),
          pillElement(entry.pill),
          entry.alerts.length ? h('span', { class: 'alert-badge', 'data-testid': 'run-alerts', title: entry.alerts.join(', ') }, `⚠ ${entry.alerts.length}`) : null,
        );
        button.addEventListener('click', () => this.hooks.select(entry.ref));
        const row = h('div', { class: 'run-row' }, box, button);
        // Nested runs are indented by their depth (a style property: allowed by the page's CSP).
        if (entry.depth) row.style.marginLeft = `${12 * Math.min(entry.depth, 4)}px`;
        if (color) row.style.borderLeftColor = color;
        return row;
      }),
    );
  }
}
