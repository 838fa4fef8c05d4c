/**
 * The session's log records: filter by level and text; bounded; follows the newest record
 * unless the reader scrolled up.
 */
import type { LogRecord } from '../../protocol.gen';
import type { LogEntry } from '../../common/state';
import { h } from '../dom';

export type Level = LogRecord['level'];
export const LEVELS: Level[] = ['DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'];
/** Rows drawn at most; older matches are summarised in one line. */
const MAX_ROWS = 500;

export interface LogFilter {
  levels: Level[];
  text: string;
}

export function filterLogs(entries: readonly LogEntry[], filter: LogFilter): LogEntry[] {
  const text = filter.text.trim().toLowerCase();
  return entries.filter(
    (e) =>
      filter.levels.includes(e.record.level) &&
      (!text || e.record.message.toLowerCase().includes(text) || e.record.logger.toLowerCase().includes(text)),
  );
}

export class LogsPanel {
  readonly element = h('section', { class: 'panel logs', 'aria-label': 'Logs' });
  private readonly list = h('div', { class: 'log-list', 'data-testid': 'logs', tabindex: 0 });
  private readonly note = h('div', { class: 'muted' });
  private readonly rows = h('div', {});
  private readonly text = h('input', { type: 'search', placeholder: 'Filter logs', 'aria-label': 'Filter logs', 'data-testid': 'log-filter' });
  private readonly boxes = new Map<Level, HTMLInputElement>();
  private filterKey = '';
  private entries: readonly LogEntry[] = [];
  /** The newest entry drawn; new records are appended after it without redrawing the rest. */
  private lastDrawn: LogEntry | undefined;
  private hiddenOlder = 0;
  private follow = true;
  private scrollPending = false;

  constructor(private readonly onFilter: (filter: LogFilter) => void) {
    const levels = h('span', { class: 'levels' });
    for (const level of LEVELS) {
      const box = h('input', { type: 'checkbox' });
      box.addEventListener('change', () => this.onFilter(this.read()));
      this.boxes.set(level, box);
      levels.append(h('label', { class: `level level-${level}` }, box, level));
    }
    this.text.addEventListener('input', () => this.onFilter(this.read()));
    this.list.append(this.note, this.rows);
    // Whether to follow the tail is decided when the reader scrolls, never by reading the
    // layout while rendering (that would force a synchronous reflow on every new record).
    this.list.addEventListener('scroll', () => {
      this.follow = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 24;
    });
    this.element.append(h('h3', {}, 'Logs'), h('div', { class: 'toolbar' }, levels, this.text), this.list);
  }

  render(entries: readonly LogEntry[], filter: LogFilter): void {
    const filterKey = JSON.stringify(filter);
    const last = entries.at(-1);
    if (filterKey === this.filterKey && entries === this.entries && last === this.lastDrawn) return;
    const from = this.lastDrawn ? entries.lastIndexOf(this.lastDrawn) + 1 : 0;
    if (filterKey === this.filterKey && entries === this.entries && from > 0) {
      this.rows.append(...filterLogs(entries.slice(from), filter).map(row));
    } else {
      for (const [level, box] of this.boxes) box.checked = filter.levels.includes(level);
      if (document.activeElement !== this.text) this.text.value = filter.text;
      this.filterKey = filterKey;
      this.entries = entries;
      this.hiddenOlder = 0;
      this.rows.replaceChildren(...filterLogs(entries, filter).slice(-MAX_ROWS).map(row));
    }
    this.lastDrawn = last;
    while (this.rows.childElementCount > MAX_ROWS) {
      this.rows.firstElementChild?.remove();
      this.hiddenOlder++;
    }
    this.note.textContent = this.rows.childElementCount
      ? this.hiddenOlder
        ? `… older records hidden (${this.hiddenOlder}+)`
        : ''
      : entries.length
        ? 'No record matches.'
        : 'No logs yet.';
    if (this.follow) this.scrollToEnd();
  }

  /** Scroll at the next frame, when the layout is fresh and reading it costs nothing. */
  private scrollToEnd(): void {
    if (this.scrollPending) return;
    this.scrollPending = true;
    requestAnimationFrame(() => {
      this.scrollPending = false;
      this.list.scrollTop = this.list.scrollHeight;
    });
  }

  private read(): LogFilter {
    return { levels: LEVELS.filter((l) => this.boxes.get(l)?.checked), text: this.text.value };
  }
}

function row(entry: LogEntry): HTMLElement {
  const { record } = entry;
  return h(
    'div',
    { class: `log log-${record.level}` },
    h('time', {}, clock(record.time)),
    h('span', { class: 'log-level' }, record.level),
    h('span', { class: 'log-logger' }, record.logger),
    h('span', { class: 'log-message' }, record.message),
  );
}

/** `HH:MM:SS` local time; Intl formatting costs too much for hundreds of rows per keystroke. */
export function clock(seconds: number): string {
  const d = new Date(seconds * 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}
