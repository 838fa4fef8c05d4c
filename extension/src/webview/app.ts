/**
 * The dashboard page: state from the transport, panels drawing the selected run. The run's
 * header (name, state, step, alerts, Pause / Resume / Stop / Test) stays in view; the
 * sections below are tabs (Charts, Runs, Samples, Forks, Health, Session, Logs), the one shown
 * remembered. Drawing happens at most once per animation frame, and charts at most five times
 * a second, so a fast stream never delays input.
 *
 * Every command a panel sends goes to the run that panel shows (never "whatever is selected
 * when the answer comes"), and runs compared on the charts are kept by key: nothing of one run
 * is ever shown under another.
 */
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import { replyOf } from '../common/replies';
import { emptyState, pill, type DashboardState, type RunView, type SourceView } from '../common/state';
import { h } from './dom';
import { assignColors, runColor } from './palette';
import type { ChartRun } from './panels/metrics';
import { historyPoints, MetricsPanel } from './panels/metrics';
import { ALERT_TITLES, AlertBanner, type OtherRun } from './panels/alerts';
import { Controls } from './panels/controls';
import { HealthPanel } from './panels/health';
import { HparamsPanel } from './panels/hparams';
import { SessionsPanel } from './panels/sessions';
import { ForksSection } from './panels/forks';
import { LogsPanel } from './panels/logs';
import { listRuns, pillElement, rootRun, RunPicker, sameRun, type RunEntry, type RunRef } from './panels/runPicker';
import { RuntimePanel } from './panels/runtime';
import { RunsTable, runRows } from './panels/runsTable';
import { SamplesSection } from './panels/samples';
import { TestsPanel } from './panels/tests';
import { parseSeriesKey } from '../common/series';
import { applyHostMessage } from './state';
import { Tabs } from './tabs';
import type { Transport } from './transport';
import { entryNamed, parseRunKey, restartOf, runKey } from './runKeys';
import { MAX_DISMISSED, restoreUi, type UiState } from './uiState';

const CHART_INTERVAL_MS = 200;
const CHART_KEYS = new Set(['selected', 'axis', 'smoothing', 'hidden', 'logCharts', 'chartFilter', 'compared', 'colors', 'tab']);


export class App {
  private state: DashboardState = emptyState();
  private ui: UiState;
  private frame = 0;
  private lastCharts = 0;
  private chartTimer: ReturnType<typeof setTimeout> | null = null;
  /** The run the panels show (commands go there). */
  private shown = '';
  private notice = '';
  private wanted: string | null;
  /** The selected run as it ended, until a restart of it appears (then that is selected). */
  private following: RunEntry | null = null;
  /** The run selected at the last render, and whether it was live then. */
  private lastSelected: { ref: RunRef; live: boolean } | null = null;
  private readonly tabs = new Tabs((tab) => this.setUi({ tab }));
  private readonly picker = new RunPicker({
    select: (ref) => this.select(ref),
    compare: (ref, on) => this.compare(runKey(ref), on),
  });
  private readonly title = h('h1', { class: 'run-title', 'data-testid': 'run-title' }, 'OnTheFly');
  private readonly pillSlot = h('span', {});
  private readonly alertSlot = h('span', {});
  /** What the header last showed (it is drawn at every frame: only changes touch the DOM). */
  private headerShown = '';
  private readonly step = h('span', { class: 'step', 'data-testid': 'step' }, '–');
  private readonly controls: Controls;
  private readonly alerts: AlertBanner;
  private readonly metrics: MetricsPanel;
  private readonly runsTable: RunsTable;
  private readonly runtime = new RuntimePanel();
  private readonly tests = new TestsPanel();
  private readonly health = new HealthPanel(
    (key, check) => this.sendTo(key, { type: 'health', check }),
    () => this.schedule(),
  );
  private readonly hparams = new HparamsPanel((command) => this.send(command));
  private readonly logs: LogsPanel;
  private readonly sessions: SessionsPanel;
  private readonly samples: SamplesSection;
  private readonly forks: ForksSection;

  constructor(
    root: HTMLElement,
    private readonly transport: Transport,
  ) {
    this.ui = restoreUi(transport.loadUiState());
    this.wanted = transport.wantedRun?.() ?? null;
    this.controls = new Controls((command) => this.send(command));
    this.alerts = new AlertBanner({
      dismiss: (id) => this.setUi({ dismissed: [...this.ui.dismissed, id].slice(-MAX_DISMISSED) }),
      select: (key) => this.select(parseRunKey(key)),
    });
    this.metrics = new MetricsPanel({
      history: (key, series, start, end, maxPoints) => this.history(key, series, start, end, maxPoints),
      savePng: (name, dataUrl) => transport.savePng(name, dataUrl),
      changeOptions: (options) => this.setUi(options),
    });
    this.runsTable = new RunsTable({
      select: (ref) => this.select(ref),
      toggleCompare: (key, on) => this.compare(key, on),
      change: (view) => this.setUi({ runs: { ...this.ui.runs, ...view } }),
    });
    this.logs = new LogsPanel((filter) => this.setUi({ logs: filter }));
    this.sessions = new SessionsPanel({
      send: (command) => this.send(command),
      choosePath: transport.choosePath?.bind(transport),
    });
    this.forks = new ForksSection({
      send: (key, command) => this.sendTo(key, command),
      select: (key, run) => this.select({ source: parseRunKey(key).source, run }),
    });
    this.samples = new SamplesSection({
      send: (key, command) => this.sendTo(key, command),
      changed: () => this.schedule(),
      choosePath: transport.choosePath?.bind(transport),
      fork: (key, selection, size) => {
        // The fork's dialog, then its progress, are in the Forks tab.
        this.tabs.show('forks');
        this.setUi({ tab: 'forks' });
        const root = runKey(rootRun(this.state, parseRunKey(key)));
        this.forks.openFork({ runKey: root, selection, size });
      },
    });
    const tabs = this.tabs;
    root.replaceChildren(
      h(
        'div',
        { class: 'layout' },
        h('aside', { class: 'sidebar' }, h('h2', {}, 'Runs'), this.picker.element),
        h(
          'main',
          {},
          h(
            'div',
            { class: 'sticky-head' },
            h('header', { class: 'run-header' }, this.title, this.pillSlot, this.alertSlot, this.step),
            this.controls.element,
            this.alerts.element,
            tabs.bar,
          ),
          tabs.pane('charts', this.metrics.element),
          tabs.pane('runs', this.runsTable.element),
          tabs.pane('samples', this.samples.element),
          tabs.pane('forks', this.forks.element),
          tabs.pane('health', h('div', { class: 'panels' }, this.health.element, this.hparams.element)),
          tabs.pane('session', h('div', { class: 'panels' }, this.sessions.element, this.runtime.element, this.tests.element)),
          tabs.pane('logs', this.logs.element),
        ),
      ),
    );
  }

  start(): void {
    this.render();
    try {
      this.transport.start((message) => this.receive(message));
    } catch (err) {
      this.notice = err instanceof Error ? err.message : String(err);
      this.render();
    }
  }

  receive(message: HostToView): void {
    if (message.type === 'notice') {
      this.notice = message.text;
      this.schedule();
      return;
    }
    const { state, changed } = applyHostMessage(this.state, message);
    this.state = state;
    if (changed) this.schedule();
  }

  private setUi(change: Partial<UiState>): void {
    this.ui = { ...this.ui, ...change };
    this.transport.saveUiState(this.ui);
    // Chart options redraw at once; the log filter must not trigger chart work.
    this.schedule(Object.keys(change).some((key) => CHART_KEYS.has(key)));
  }

  private select(ref: RunRef): void {
    this.wanted = null;
    this.following = null;
    this.setUi({ selected: ref });
  }

  /** Add run `key` to the runs compared (with the selected one), or take it out. */
  private compare(key: string, on: boolean): void {
    const selected = this.ui.selected ? runKey(this.ui.selected) : null;
    const current = this.ui.compared.filter((k) => k !== key);
    const compared = on ? [...(selected && !current.includes(selected) ? [selected] : []), ...current, key] : current;
    this.setUi({ compared: [...new Set(compared)], colors: assignColors(compared, this.ui.colors) });
  }

  private schedule(now = false): void {
    if (now) this.lastCharts = 0;
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private selection(entries: RunEntry[]): { ref: RunRef; source: SourceView; run: RunView } | null {
    this.followRun(entries);
    let ref = this.ui.selected;
    if (!entries.some((e) => sameRun(e.ref, ref))) ref = entries[0]?.ref ?? null;
    if (!ref) return null;
    if (!sameRun(ref, this.ui.selected)) this.ui = { ...this.ui, selected: ref };
    const source = this.state.sources[ref.source];
    return { ref, source, run: source.runs[ref.run] };
  }

  /** Select the run a `?run=` asked for once it appears, and follow a run that restarted. */
  private followRun(entries: RunEntry[]): void {
    if (this.wanted) {
      const found = entryNamed(entries, this.wanted);
      if (found) {
        this.wanted = null;
        this.ui = { ...this.ui, selected: found.ref };
      }
    }
    const current = entries.find((e) => sameRun(e.ref, this.ui.selected));
    const same = current !== undefined && this.lastSelected !== null && sameRun(current.ref, this.lastSelected.ref);
    if (current?.ended && same && this.lastSelected?.live) this.following = current; // it just ended
    const next = this.following && restartOf(entries, this.following);
    if (next) {
      this.following = null;
      this.ui = { ...this.ui, selected: next.ref };
    }
    const shown = next ?? current;
    this.lastSelected = shown ? { ref: shown.ref, live: !shown.ended } : null;
  }

  private render(): void {
    const entries = listRuns(this.state);
    const selected = this.selection(entries);
    const key = selected ? runKey(selected.ref) : '';
    this.shown = key;
    const compared = this.comparedRuns(entries, selected?.ref ?? null);
    const colors = new Map(compared.filter((r) => r.color).map((r) => [r.key, r.color as string]));
    this.picker.render(entries, selected?.ref ?? null, colors, runKey);
    this.tabs.show(this.ui.tab);
    const state = selected ? pill(selected.source, selected.run) : null;
    const live = state !== null && state !== 'disconnected' && state !== 'finished';
    this.controls.render(state, key, selected?.run.info.step ?? 0);
    this.alerts.render(key, selected?.run ?? null, this.ui.dismissed, this.otherAlerts(entries, key), this.notice);
    this.tabs.badge('runs', entries.length > 1 ? String(entries.length) : '');
    this.health.render(key, selected?.run ?? null, live);
    this.hparams.render(key, selected?.run ?? null, live);
    this.sessions.render(key, state, selected?.run.info.name ?? '', selected?.run.info.step ?? 0);
    this.samples.render(key, selected?.run ?? null, state, this.tabs.isShown('samples'));
    this.renderForks(selected);
    if (selected) {
      const info = selected.run.info;
      const header = JSON.stringify([info.project, info.name, state, info.alerts]);
      if (header !== this.headerShown) {
        this.headerShown = header;
        this.title.textContent = `${info.project} / ${info.name}`;
        this.pillSlot.replaceChildren(pillElement(state ?? 'disconnected'));
        const named = info.alerts.map((kind) => ALERT_TITLES[kind]).join(', ');
        this.alertSlot.replaceChildren(...(info.alerts.length ? [h('span', { class: 'alert-badge', 'data-testid': 'header-alerts', title: info.alerts.join(', ') }, `⚠ ${named}`)] : []));
      }
      this.step.textContent = `step ${info.step} · epoch ${info.epoch}`;
      this.step.dataset.step = String(info.step);
    }
    if (this.tabs.isShown('runs')) this.runsTable.render(runRows(this.state, entries, runKey), colors, key, this.ui.runs);
    this.runtime.render(selected?.run.runtime ?? null);
    this.tests.render(selected?.run.tests ?? []);
    this.logs.render(selected?.source.logs ?? [], this.ui.logs);
    if (this.tabs.isShown('charts')) this.renderCharts(compared);
  }

  /** The selected run first, then the runs compared with it (colours only when several). */
  private comparedRuns(entries: RunEntry[], selected: RunRef | null): ChartRun[] {
    if (!selected) return [];
    const selectedKey = runKey(selected);
    const known = new Map(entries.map((e) => [runKey(e.ref), e]));
    const keys = [selectedKey, ...this.ui.compared.filter((k) => k !== selectedKey && known.has(k))];
    const runOf = (key: string): RunView => {
      const ref = parseRunKey(key);
      return this.state.sources[ref.source].runs[ref.run];
    };
    const names = new Map<string, number>();
    for (const key of keys) names.set(known.get(key)?.name ?? '', (names.get(known.get(key)?.name ?? '') ?? 0) + 1);
    const label = (key: string): string => {
      const entry = known.get(key);
      if (!entry) return key;
      // Two compared runs of one name (a restart) are told apart by their session.
      return (names.get(entry.name) ?? 0) > 1 ? `${entry.name} (${entry.ref.source})` : entry.name;
    };
    if (keys.length < 2) return [{ key: selectedKey, label: label(selectedKey), run: runOf(selectedKey), color: null }];
    const colors = assignColors(keys, this.ui.colors);
    if (keys.some((k) => this.ui.colors[k] !== colors[k])) {
      this.ui = { ...this.ui, colors: { ...this.ui.colors, ...colors } };
      this.transport.saveUiState(this.ui);
    }
    return keys.map((key) => ({ key, label: label(key), run: runOf(key), color: runColor(colors[key]) }));
  }

  private otherAlerts(entries: RunEntry[], selected: string): OtherRun[] {
    return entries
      .filter((e) => e.alerts.length && runKey(e.ref) !== selected)
      .map((e) => ({ key: runKey(e.ref), label: `${e.project}/${e.name}`, kinds: e.alerts }));
  }

  /** The forks section shows the top-level run of the selected one (a fork shows its parent's). */
  private renderForks(selected: ReturnType<App['selection']>): void {
    if (!selected) {
      this.forks.render({ key: '', run: null, pill: null, children: [], selected: '' });
      return;
    }
    const root = rootRun(this.state, selected.ref);
    const run = selected.source.runs[root.run];
    const children = Object.values(selected.source.runs).filter((r) => r !== run && rootRun(this.state, { source: root.source, run: r.info.run }).run === root.run);
    this.forks.render({ key: runKey(root), run, pill: pill(selected.source, run), children, selected: selected.ref.run });
  }

  /** Charts redraw at most every CHART_INTERVAL_MS; a change in between is drawn at its end. */
  private renderCharts(runs: ChartRun[]): void {
    const wait = this.lastCharts + CHART_INTERVAL_MS - performance.now();
    if (wait > 0) {
      this.chartTimer ??= setTimeout(() => {
        this.chartTimer = null;
        this.schedule();
      }, wait);
      return;
    }
    this.lastCharts = performance.now();
    if (this.metrics.render(runs, this.ui)) this.schedule(true);
  }

  /** Send a command to the run the panels show. */
  private send(command: CommandBody): Promise<Outcome> {
    if (!this.shown) {
      return Promise.resolve({ ok: false as const, code: 'no_run', message: 'no run selected' });
    }
    return this.sendTo(this.shown, command);
  }

  private sendTo(key: string, command: CommandBody): Promise<Outcome> {
    const ref = parseRunKey(key);
    const outcome = this.transport.request(ref.source, { ...command, run: ref.run });
    void outcome.then((result) => this.after(key, command, result));
    return outcome;
  }

  /** What a command changed is shown again: the per-sample views after a merge or a load. */
  private after(key: string, command: CommandBody, outcome: Outcome): void {
    if (!outcome.ok) return;
    if (['merge', 'discard_merge', 'restore', 'import'].includes(command.type)) this.samples.refresh(key);
  }

  private async history(key: string, series: string, start: number, end: number, maxPoints: number) {
    const { split, metric } = parseSeriesKey(series);
    const outcome = replyOf('history', await this.sendTo(key, { type: 'history', metric, split, start, end, max_points: maxPoints }));
    if (!outcome.ok) {
      console.warn(`OnTheFly: history of ${series} failed: ${outcome.message}`);
      return null;
    }
    return historyPoints(outcome.data);
  }
}
