/** The status-bar item: how many runs are live and in which state; a click opens the dashboard. */
import * as vscode from 'vscode';
import { pill, type DashboardState } from '../common/state';
import { Disposable } from './disposable';
import type { RunStore } from './runStore';

export const SHOW_COMMAND = 'onthefly.showDashboard';

/** `2 running, 1 paused` for the live sessions' runs, or `no live runs`. */
export function summarize(state: DashboardState): string {
  const counts = new Map<string, number>();
  for (const source of Object.values(state.sources)) {
    if (source.ended) continue;
    for (const run of Object.values(source.runs)) {
      const p = pill(source, run);
      counts.set(p, (counts.get(p) ?? 0) + 1);
    }
  }
  if (counts.size === 0) return 'no live runs';
  return [...counts].map(([state, n]) => `${n} ${state}`).join(', ');
}

export class RunStatusBar extends Disposable {
  private readonly item = this.register(vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50));
  private pending: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly store: RunStore) {
    super();
    this.item.command = SHOW_COMMAND;
    this.item.tooltip = 'OnTheFly: show the dashboard';
    this.register(store.subscribe(() => this.schedule()));
    this.update();
    this.item.show();
  }

  override dispose(): void {
    if (this.pending) clearTimeout(this.pending);
    super.dispose();
  }

  /** Metrics stream many times a second; the summary only needs a few updates. */
  private schedule(): void {
    this.pending ??= setTimeout(() => {
      this.pending = null;
      this.update();
    }, 250);
  }

  private update(): void {
    this.item.text = `$(pulse) OnTheFly: ${summarize(this.store.state)}`;
  }
}
