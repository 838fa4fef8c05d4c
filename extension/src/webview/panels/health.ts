/**
 * Health checks of the selected run: one button per check, the latest result of each with
 * its findings (worst first: severity, one-line summary, the numbers behind it on demand).
 * Checks run one at a time per run: the session answers a second `health` command `busy`
 * while one runs, so further clicks wait in a queue and go out after the previous answer.
 */
import type { Outcome } from '../../common/messages';
import type { RunView } from '../../common/state';
import type { Finding, HealthResult } from '../../protocol.gen';
import { fill, formatNumber, h } from '../dom';

export type Check = HealthResult['check'];
export const CHECKS: Check[] = ['determinism', 'gradients', 'instability', 'activations', 'throughput', 'distribution'];
const SEVERITY_RANK: Record<Finding['severity'], number> = { error: 0, warning: 1, info: 2 };
/** Characters of a finding's details shown at most (a per-layer table can be long). */
const MAX_DETAILS = 20_000;

/** Findings worst first; the order among equals is kept. */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  return findings.slice().sort((a, b) => SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity]);
}

/** The worst severity of a result, or `ok` when it has no finding above `info`. */
export function verdict(result: HealthResult): 'error' | 'warning' | 'ok' {
  const worst = sortFindings(result.findings)[0]?.severity;
  return worst === 'error' || worst === 'warning' ? worst : 'ok';
}

export type RunCheck = (check: Check) => Promise<Outcome>;

/** The one-at-a-time queue of the checks of one run. */
export class CheckQueue {
  running: Check | null = null;
  readonly waiting: Check[] = [];
  /** The last failure (the run refused or could not run a check), shown until the next one. */
  problem = '';

  constructor(
    private readonly runCheck: RunCheck,
    private readonly changed: () => void,
  ) {}

  /** Queue `check` (once); it is sent when no other check of this run is out. */
  add(check: Check): void {
    if (this.running === check || this.waiting.includes(check)) return;
    this.waiting.push(check);
    this.next();
    this.changed();
  }

  private next(): void {
    if (this.running !== null) return;
    const check = this.waiting.shift();
    if (check === undefined) return;
    this.running = check;
    void this.runCheck(check).then((outcome) => {
      this.problem = outcome.ok ? '' : `${check} failed: ${outcome.message} (${outcome.code})`;
      this.running = null;
      this.next();
      this.changed();
    });
  }
}

export class HealthPanel {
  readonly element = h('section', { class: 'panel health', 'aria-label': 'Health checks' });
  private readonly buttons = new Map<Check, HTMLButtonElement>();
  private readonly all = h('button', { class: 'small', title: 'Run every check, one after the other', 'data-testid': 'health-all' }, 'All');
  private readonly status = h('p', { class: 'health-status muted', 'data-testid': 'health-status' });
  private readonly body = h('div', { 'data-testid': 'health' });
  private readonly queues = new Map<string, CheckQueue>();
  private runKey = '';
  private signature = '';

  /** Args: `runCheck(runKey, check)` sends one `health` command to run `runKey`. */
  constructor(
    private readonly runCheck: (runKey: string, check: Check) => Promise<Outcome>,
    private readonly changed: () => void,
  ) {
    const bar = h('div', { class: 'toolbar health-buttons' });
    for (const check of CHECKS) {
      const button = h('button', { class: 'small', 'data-check': check, title: `Run the ${check} check at the next batch boundary` }, check);
      button.addEventListener('click', () => this.queue().add(check));
      this.buttons.set(check, button);
      bar.append(button);
    }
    this.all.addEventListener('click', () => CHECKS.forEach((c) => this.queue().add(c)));
    bar.append(this.all);
    this.element.append(h('h3', {}, 'Health'), bar, this.status, this.body);
  }

  render(runKey: string, run: RunView | null, live: boolean): void {
    this.runKey = runKey;
    const queue = this.queues.get(runKey);
    for (const [check, button] of this.buttons) {
      button.disabled = !live;
      button.classList.toggle('busy', queue?.running === check || queue?.waiting.includes(check) === true);
    }
    this.all.disabled = !live;
    const pending = queue ? [queue.running, ...queue.waiting].filter((c) => c !== null) : [];
    this.status.textContent = [pending.length ? `running: ${pending.join(', ')}…` : '', queue?.problem ?? ''].filter(Boolean).join(' · ');
    this.status.classList.toggle('error', Boolean(queue?.problem));
    const results = CHECKS.map((c) => run?.health[c]).filter((r): r is HealthResult => r !== undefined);
    const signature = `${runKey}|${results.map((r) => r.seq).join(',')}`;
    if (signature === this.signature) return;
    this.signature = signature;
    if (results.length === 0) {
      fill(this.body, h('p', { class: 'muted' }, 'No health checks run yet.'));
      return;
    }
    fill(this.body, ...results.map(resultElement));
  }

  private queue(): CheckQueue {
    const key = this.runKey;
    let queue = this.queues.get(key);
    if (!queue) {
      queue = new CheckQueue((check) => this.runCheck(key, check), this.changed);
      this.queues.set(key, queue);
    }
    return queue;
  }
}

function resultElement(result: HealthResult): HTMLElement {
  const findings = sortFindings(result.findings);
  return h(
    'div',
    { class: 'health-result', 'data-check': result.check },
    h(
      'div',
      { class: 'health-head' },
      h('span', { class: `severity severity-${verdict(result)}` }, verdict(result)),
      h('strong', {}, result.check),
      h('span', { class: 'muted' }, `step ${result.step} · ${formatNumber(result.duration, 3)} s`),
    ),
    h(
      'ul',
      { class: 'findings' },
      ...findings.map((f) =>
        h(
          'li',
          { class: `finding finding-${f.severity}` },
          h('span', { class: `severity severity-${f.severity}` }, f.severity),
          h('span', { class: 'finding-summary' }, f.summary),
          Object.keys(f.details).length
            ? h('details', {}, h('summary', {}, 'details'), h('pre', {}, detailsText(f.details)))
            : null,
        ),
      ),
    ),
  );
}

export function detailsText(details: Record<string, unknown>): string {
  const text = JSON.stringify(details, null, 1);
  return text.length > MAX_DETAILS ? `${text.slice(0, MAX_DETAILS)}\n… (${text.length - MAX_DETAILS} more characters)` : text;
}
