/** The list of every run the page knows, live ones first, each with its status pill. */
import { pill, type DashboardState, type Pill } from '../../common/state';
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
}

/** Live runs (newest first), then finished or disconnected ones (newest first). */
export function listRuns(state: DashboardState): RunEntry[] {
  const entries: RunEntry[] = [];
  for (const source of Object.values(state.sources)) {
    for (const run of Object.values(source.runs)) {
      entries.push({
        ref: { source: source.key, run: run.info.run },
        name: run.info.name,
        project: run.info.project,
        pill: pill(source, run),
        startedAt: run.info.started_at,
      });
    }
  }
  const live = (e: RunEntry): number => (e.pill === 'finished' || e.pill === 'disconnected' ? 1 : 0);
  return entries.sort((a, b) => live(a) - live(b) || b.startedAt - a.startedAt);
}

export function sameRun(a: RunRef | null, b: RunRef | null): boolean {
  return a !== null && b !== null && a.source === b.source && a.run === b.run;
}

export function pillElement(value: Pill): HTMLElement {
  return h('span', { class: `pill pill-${value}`, 'data-testid': 'pill' }, value);
}

export class RunPicker {
  readonly element = h('nav', { class: 'run-picker', 'aria-label': 'Runs' });
  private signature = '';

  constructor(private readonly onSelect: (ref: RunRef) => void) {}

  render(entries: RunEntry[], selected: RunRef | null): void {
    const signature = JSON.stringify([entries.map((e) => [e.ref, e.name, e.pill]), selected]);
    if (signature === this.signature) return;
    this.signature = signature;
    if (entries.length === 0) {
      fill(this.element, h('p', { class: 'muted' }, 'Waiting for a training run…'));
      return;
    }
    fill(
      this.element,
      ...entries.map((entry) => {
        const button = h(
          'button',
          {
            class: 'run',
            'data-testid': 'run',
            'aria-pressed': sameRun(entry.ref, selected) ? 'true' : 'false',
            title: `${entry.project}/${entry.name} (${entry.ref.source})`,
          },
          h('span', { class: 'run-name' }, entry.name),
          // Two processes may run the same project and name: the session tells them apart.
          h('span', { class: 'run-project muted' }, `${entry.project} · ${entry.ref.source}`),
          pillElement(entry.pill),
        );
        button.addEventListener('click', () => this.onSelect(entry.ref));
        return button;
      }),
    );
  }
}
