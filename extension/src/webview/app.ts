/**
 * The dashboard page: state from the transport, panels drawing the selected run. Drawing
 * happens at most once per animation frame, and charts at most five times a second, so a
 * fast stream never delays input.
 */
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import { emptyState, pill, type DashboardState, type RunView, type SourceView } from '../common/state';
import { h } from './dom';
import type { ChartOptions } from './panels/metrics';
import { historyPoints, MetricsPanel } from './panels/metrics';
import { Controls } from './panels/controls';
import { HealthPanel } from './panels/health';
import { HparamsPanel } from './panels/hparams';
import { SessionsPanel } from './panels/sessions';
import { ForksSection } from './panels/forks';
import { LEVELS, LogsPanel, type LogFilter } from './panels/logs';
import { listRuns, pillElement, rootRun, RunPicker, sameRun, type RunRef } from './panels/runPicker';
import { RuntimePanel } from './panels/runtime';
import { SamplesSection } from './panels/samples';
import { TestsPanel } from './panels/tests';
import { parseSeriesKey } from '../common/series';
import { applyHostMessage } from './state';
import type { Transport } from './transport';

/** What the page remembers across reloads (never the runs themselves). */
export interface UiState extends ChartOptions {
  selected: RunRef | null;
  logs: LogFilter;
}

const DEFAULT_UI: UiState = {
  selected: null,
  axis: 'step',
  smoothing: { kind: 'none' },
  hidden: [],
  logs: { levels: ['INFO', 'WARNING', 'ERROR', 'CRITICAL'], text: '' },
};
const CHART_INTERVAL_MS = 200;
const CHART_KEYS = new Set(['selected', 'axis', 'smoothing', 'hidden']);

export function restoreUi(saved: unknown): UiState {
  if (typeof saved !== 'object' || saved === null) return structuredClone(DEFAULT_UI);
  const ui = { ...structuredClone(DEFAULT_UI), ...(saved as Partial<UiState>) };
  if (ui.axis !== 'step' && ui.axis !== 'epoch') ui.axis = 'step';
  if (!Array.isArray(ui.hidden)) ui.hidden = [];
  if (!ui.logs || !Array.isArray(ui.logs.levels)) ui.logs = structuredClone(DEFAULT_UI.logs);
  ui.logs.levels = ui.logs.levels.filter((l) => LEVELS.includes(l));
  return ui;
}

export class App {
  private state: DashboardState = emptyState();
  private ui: UiState;
  private frame = 0;
  private lastCharts = 0;
  private chartTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly picker = new RunPicker((ref) => this.setUi({ selected: ref }));
  private readonly title = h('h1', { class: 'run-title' }, 'OnTheFly');
  private readonly pillSlot = h('span', {});
  private readonly step = h('span', { class: 'step', 'data-testid': 'step' }, '–');
  private readonly controls: Controls;
  private readonly metrics: MetricsPanel;
  private readonly runtime = new RuntimePanel();
  private readonly tests = new TestsPanel();
  private readonly health = new HealthPanel(
    (key, check) => this.sendTo(parseRunKey(key), { type: 'health', check }),
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
    this.controls = new Controls((command) => this.send(command));
    this.metrics = new MetricsPanel({
      history: (key, start, end, maxPoints) => this.history(key, start, end, maxPoints),
      savePng: (name, dataUrl) => transport.savePng(name, dataUrl),
      changeOptions: (options) => this.setUi(options),
    });
    this.logs = new LogsPanel((filter) => this.setUi({ logs: filter }));
    this.sessions = new SessionsPanel({
      send: (command) => this.send(command),
      choosePath: transport.choosePath?.bind(transport),
    });
    this.forks = new ForksSection({
      send: (key, command) => this.sendTo(parseRunKey(key), command),
      select: (key, run) => this.setUi({ selected: { source: parseRunKey(key).source, run } }),
    });
    this.samples = new SamplesSection({
      send: (command) => this.send(command),
      changed: () => this.schedule(),
      choosePath: transport.choosePath?.bind(transport),
      fork: (key, selection, size) => {
        const root = runKey(rootRun(this.state, parseRunKey(key)));
        this.forks.openFork({ runKey: root, selection, size });
      },
    });
    root.replaceChildren(
      h(
        'div',
        { class: 'layout' },
        h('aside', { class: 'sidebar' }, h('h2', {}, 'Runs'), this.picker.element),
        h(
          'main',
          {},
          h('header', { class: 'run-header' }, this.title, this.pillSlot, this.step),
          this.controls.element,
          this.metrics.element,
          this.samples.element,
          this.forks.element,
          h('div', { class: 'panels' }, this.health.element, this.hparams.element),
          h('div', { class: 'panels' }, this.runtime.element, this.tests.element, this.sessions.element),
          this.logs.element,
        ),
      ),
    );
  }

  start(): void {
    this.render();
    try {
      this.transport.start((message) => this.receive(message));
    } catch (err) {
      this.title.textContent = err instanceof Error ? err.message : String(err);
    }
  }

  receive(message: HostToView): void {
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

  private schedule(now = false): void {
    if (now) this.lastCharts = 0;
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private selection(): { ref: RunRef; source: SourceView; run: RunView } | null {
    const entries = listRuns(this.state);
    let ref = this.ui.selected;
    if (!entries.some((e) => sameRun(e.ref, ref))) ref = entries[0]?.ref ?? null;
    if (!ref) return null;
    if (!sameRun(ref, this.ui.selected)) this.ui = { ...this.ui, selected: ref };
    const source = this.state.sources[ref.source];
    return { ref, source, run: source.runs[ref.run] };
  }

  private render(): void {
    const selected = this.selection();
    this.picker.render(listRuns(this.state), selected?.ref ?? null);
    const state = selected ? pill(selected.source, selected.run) : null;
    const key = selected ? runKey(selected.ref) : '';
    const live = state !== null && state !== 'disconnected' && state !== 'finished';
    this.controls.render(state, key);
    this.health.render(key, selected?.run ?? null, live);
    this.hparams.render(key, selected?.run ?? null, live);
    this.sessions.render(key, state, selected?.run.info.name ?? '', selected?.run.info.step ?? 0);
    this.samples.render(key, selected?.run ?? null, state);
    this.renderForks(selected);
    if (selected) {
      const info = selected.run.info;
      this.title.textContent = `${info.project} / ${info.name}`;
      this.pillSlot.replaceChildren(pillElement(state ?? 'disconnected'));
      this.step.textContent = `step ${info.step} · epoch ${info.epoch}`;
      this.step.dataset.step = String(info.step);
    }
    this.runtime.render(selected?.run.runtime ?? null);
    this.tests.render(selected?.run.tests ?? []);
    this.logs.render(selected?.source.logs ?? [], this.ui.logs);
    this.renderCharts(selected);
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
  private renderCharts(selected: ReturnType<App['selection']>): void {
    const wait = this.lastCharts + CHART_INTERVAL_MS - performance.now();
    if (wait > 0) {
      this.chartTimer ??= setTimeout(() => {
        this.chartTimer = null;
        this.schedule();
      }, wait);
      return;
    }
    this.lastCharts = performance.now();
    const key = selected ? runKey(selected.ref) : '';
    if (this.metrics.render(key, selected?.run ?? null, this.ui)) this.schedule(true);
  }

  /** Send a command to the selected run. */
  private send(command: CommandBody): Promise<Outcome> {
    const selected = this.selection();
    if (!selected) {
      return Promise.resolve({ ok: false as const, code: 'no_run', message: 'no run selected' });
    }
    return this.sendTo(selected.ref, command);
  }

  private sendTo(ref: RunRef, command: CommandBody): Promise<Outcome> {
    return this.transport.request(ref.source, { ...command, run: ref.run });
  }

  private async history(key: string, start: number, end: number, maxPoints: number) {
    const { split, metric } = parseSeriesKey(key);
    const outcome = await this.send({ type: 'history', metric, split, start, end, max_points: maxPoints });
    if (!outcome.ok) {
      console.warn(`OnTheFly: history of ${key} failed: ${outcome.message}`);
      return null;
    }
    return historyPoints(outcome.data);
  }
}

/** One string per run (session and run), for what panels keep per run. */
export function runKey(ref: RunRef): string {
  return `${ref.source}\u0000${ref.run}`;
}

export function parseRunKey(key: string): RunRef {
  const cut = key.indexOf('\u0000');
  return { source: key.slice(0, cut), run: key.slice(cut + 1) };
}
