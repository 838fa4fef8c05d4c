/**
 * What the page remembers across reloads in the webview's own state (never the runs' data),
 * and how a remembered state is read back: field by field, anything malformed replaced by
 * its default.
 */
import type { ChartOptions } from './panels/metrics';
import { LEVELS, type LogFilter } from './panels/logs';
import type { RunRef } from './panels/runPicker';
import type { TableView } from './panels/runsTable';
import { isTab, type TabName } from './tabs';

/** What the page remembers across reloads (never the runs' data). */
export interface UiState extends ChartOptions {
  selected: RunRef | null;
  logs: LogFilter;
  tab: TabName;
  /** Runs compared on the charts, by key. */
  compared: string[];
  /** The palette index of each run ever compared, so a run keeps its colour. */
  colors: Record<string, number>;
  /** Alerts the reader dismissed (`runKey#seq`). */
  dismissed: string[];
  runs: TableView;
}

export const DEFAULT_UI: UiState = {
  selected: null,
  axis: 'step',
  smoothing: { kind: 'none' },
  hidden: [],
  logCharts: [],
  chartFilter: '',
  logs: { levels: ['INFO', 'WARNING', 'ERROR', 'CRITICAL'], text: '' },
  tab: 'charts',
  compared: [],
  colors: {},
  dismissed: [],
  runs: { sort: 'started', descending: true, filter: '' },
};

/** Alerts remembered as dismissed, at most (the oldest are forgotten). */
export const MAX_DISMISSED = 200;

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

export function restoreUi(saved: unknown): UiState {
  if (typeof saved !== 'object' || saved === null) return structuredClone(DEFAULT_UI);
  const ui = { ...structuredClone(DEFAULT_UI), ...(saved as Partial<UiState>) };
  if (ui.axis !== 'step' && ui.axis !== 'epoch') ui.axis = 'step';
  ui.hidden = strings(ui.hidden);
  ui.logCharts = strings(ui.logCharts);
  ui.compared = strings(ui.compared);
  ui.dismissed = strings(ui.dismissed);
  if (!isTab(ui.tab)) ui.tab = 'charts';
  if (typeof ui.chartFilter !== 'string') ui.chartFilter = '';
  if (typeof ui.colors !== 'object' || ui.colors === null || Array.isArray(ui.colors)) ui.colors = {};
  if (!ui.logs || !Array.isArray(ui.logs.levels)) ui.logs = structuredClone(DEFAULT_UI.logs);
  ui.logs.levels = ui.logs.levels.filter((l) => LEVELS.includes(l));
  if (typeof ui.runs !== 'object' || ui.runs === null || typeof ui.runs.sort !== 'string') ui.runs = structuredClone(DEFAULT_UI.runs);
  return ui;
}
