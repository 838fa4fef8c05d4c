/**
 * The alerts of the selected run, as a banner under the header: each alert raised and not
 * cleared (a NaN loss, a loss spike, a stalled run, a crashed data loader), with its message
 * and step, until it clears or the reader dismisses it; and which other runs have alerts,
 * one click away. Also the page's own notices (its run ended: where to go on).
 */
import type { RunView } from '../../common/state';
import type { Alert } from '../../protocol.gen';
import { fill, h } from '../dom';

/** What the banner says of one alert kind, in a few words. */
export const ALERT_TITLES: Record<Alert['kind'], string> = {
  nonfinite_loss: 'NaN loss',
  nonfinite_grad: 'NaN gradients',
  loss_spike: 'loss spike',
  stalled: 'stalled',
  loader_crashed: 'data loader crashed',
  crashed: 'crashed',
};

/** The latest `raised` alert of each kind the run still has raised, oldest first. */
export function activeAlerts(run: RunView): Alert[] {
  return run.info.alerts
    .map((kind) => [...run.alerts].reverse().find((a) => a.kind === kind && a.state === 'raised'))
    .filter((a): a is Alert => a !== undefined);
}

/** The id a dismissed alert is remembered by. */
export function alertId(runKey: string, alert: Alert): string {
  return `${runKey}#${alert.seq}`;
}

export interface OtherRun {
  key: string;
  label: string;
  kinds: Alert['kind'][];
}

export interface AlertHooks {
  dismiss(id: string): void;
  select(runKey: string): void;
}

export class AlertBanner {
  readonly element = h('section', { class: 'alert-banner', 'aria-label': 'Alerts', 'aria-live': 'polite', 'data-testid': 'alerts' });
  private signature = '';

  constructor(private readonly hooks: AlertHooks) {}

  render(runKey: string, run: RunView | null, dismissed: readonly string[], others: readonly OtherRun[], notice: string): void {
    const alerts = run ? activeAlerts(run).filter((a) => !dismissed.includes(alertId(runKey, a))) : [];
    const signature = JSON.stringify([runKey, alerts.map((a) => a.seq), others, notice]);
    if (signature === this.signature) return;
    this.signature = signature;
    const rows: HTMLElement[] = [];
    if (notice) rows.push(h('div', { class: 'notice', 'data-testid': 'notice' }, notice));
    for (const alert of alerts) {
      const dismiss = h('button', { class: 'small secondary', title: 'Hide this alert (it stays in the run\'s history)' }, 'Dismiss');
      dismiss.addEventListener('click', () => this.hooks.dismiss(alertId(runKey, alert)));
      rows.push(
        h(
          'div',
          { class: `alert alert-${alert.severity}`, 'data-testid': 'alert', 'data-kind': alert.kind },
          h('span', { class: 'alert-kind' }, ALERT_TITLES[alert.kind]),
          h('span', { class: 'alert-message' }, alert.message),
          h('span', { class: 'muted' }, `step ${alert.step}`),
          dismiss,
        ),
      );
    }
    if (others.length) {
      const links = others.map((other) => {
        const button = h('button', { class: 'link', 'data-testid': 'alert-other' }, `${other.label} (${other.kinds.map((k) => ALERT_TITLES[k]).join(', ')})`);
        button.addEventListener('click', () => this.hooks.select(other.key));
        return button;
      });
      rows.push(h('div', { class: 'alert-others muted' }, 'Alerts in other runs: ', ...links));
    }
    fill(this.element, ...rows);
    this.element.hidden = rows.length === 0;
  }
}
