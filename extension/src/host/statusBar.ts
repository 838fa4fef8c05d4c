/**
 * The status-bar item: how many runs are live and in which state, and how many have alerts (a
 * NaN loss, a stalled run: the item turns to the warning colour); a click opens the dashboard.
 */
import * as vscode from 'vscode';
import { pill, type DashboardState } from '../common/state';
import { Disposable } from './disposable';
import type { RunStore } from './runStore';

export const SHOW_COMMAND = 'onthefly.showDashboard';

/** `2 running, 1 paused` for the live sessions' runs (`· 1 alert` when some have one), or `no live runs`. */
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
  const alerts = alerting(state).length;
  const text = [...counts].map(([state, n]) => `${n} ${state}`).join(', ');
  return alerts ? `${text} · ${alerts} alert${alerts > 1 ? 's' : ''}` : text;
}

/** `project/run: nonfinite_loss, stalled` for each live run with alerts raised. */
export function alerting(state: DashboardState): string[] {
  const out: string[] = [];
  for (const source of Object.values(state.sources)) {
    if (source.ended) continue;
    for (const run of Object.values(source.runs)) {
      if (run.info.alerts.length) out.push(`${run.info.project}/${run.info.name}: ${run.info.alerts.join(', ')}`);
    }
  }
  return out;
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
    const alerts = alerting(this.store.state);
    this.item.text = `${alerts.length ? '$(warning)' : '$(pulse)'} OnTheFly: ${summarize(this.store.state)}`;
    this.item.backgroundColor = alerts.length ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    this.item.tooltip = alerts.length ? `OnTheFly: show the dashboard\nAlerts: ${alerts.join('; ')}` : 'OnTheFly: show the dashboard';
  }
}
