/**
 * The dashboard's sections as tabs (Charts, Runs, Samples, …): one visible at a time, the
 * choice remembered with the page's other UI state. Hidden tabs keep their content; a panel
 * asks `isShown` before spending time on a tab nobody looks at.
 */
import { h } from './dom';

export const TABS = ['charts', 'runs', 'samples', 'forks', 'health', 'session', 'logs'] as const;
export type TabName = (typeof TABS)[number];

const TITLES: Record<TabName, string> = {
  charts: 'Charts',
  runs: 'Runs',
  samples: 'Samples',
  forks: 'Forks',
  health: 'Health',
  session: 'Session',
  logs: 'Logs',
};

export function isTab(value: unknown): value is TabName {
  return typeof value === 'string' && (TABS as readonly string[]).includes(value);
}

export class Tabs {
  readonly bar = h('nav', { class: 'tabs', role: 'tablist', 'aria-label': 'Sections' });
  private readonly buttons = new Map<TabName, HTMLButtonElement>();
  private readonly panes = new Map<TabName, HTMLElement>();
  private current: TabName = 'charts';
  private shownOnce = false;

  constructor(private readonly chosen: (tab: TabName) => void) {
    for (const name of TABS) {
      const button = h('button', { class: 'tab', role: 'tab', 'data-testid': `tab-${name}`, 'aria-selected': 'false' }, TITLES[name]);
      button.addEventListener('click', () => this.chosen(name));
      this.buttons.set(name, button);
      this.bar.append(button);
    }
  }

  /** The pane of tab `name`, holding `children`. */
  pane(name: TabName, ...children: HTMLElement[]): HTMLElement {
    const pane = h('div', { class: 'tab-pane', role: 'tabpanel', 'data-tab': name, hidden: name !== this.current }, ...children);
    this.panes.set(name, pane);
    return pane;
  }

  show(name: TabName): void {
    if (name === this.current && this.shownOnce) return; // called at every frame: no DOM writes
    this.shownOnce = true;
    this.current = name;
    for (const [tab, button] of this.buttons) button.setAttribute('aria-selected', String(tab === name));
    for (const [tab, pane] of this.panes) pane.hidden = tab !== name;
  }

  isShown(name: TabName): boolean {
    return this.current === name;
  }

  /** A small count after the tab's title (`Runs 3`), or none. */
  badge(name: TabName, text: string, tone: 'plain' | 'warning' | 'error' = 'plain'): void {
    const button = this.buttons.get(name);
    if (!button) return;
    const current = button.querySelector('.tab-badge');
    if (!text) {
      current?.remove();
      return;
    }
    const className = `tab-badge tone-${tone}`;
    if (current?.textContent === text && current.className === className) return;
    const badge = current ?? h('span', { class: className });
    badge.textContent = text;
    badge.className = className;
    if (!current) button.append(badge);
  }
}
