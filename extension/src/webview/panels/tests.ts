/**
 * Test-set evaluations of the selected run, newest last: one column per metric. A metric the
 * trainer names with its split (`test_acc`, `test/acc`) is shown under its bare name, and the
 * loss once (the result's own `loss`, else a metric named so).
 */
import type { TestResult } from '../../protocol.gen';
import { fill, formatNumber, h } from '../dom';

/** `test_acc` and `test/acc` are `acc`; a name that is only the prefix stays as it is. */
export function bareName(name: string): string {
  for (const prefix of ['test_', 'test/']) if (name.startsWith(prefix) && name.length > prefix.length) return name.slice(prefix.length);
  return name;
}

/** Each result's values by bare metric name, `loss` first, and the columns they fill. */
export function testTable(results: readonly TestResult[]): { columns: string[]; rows: Record<string, number | null>[] } {
  const rows = results.map((r) => {
    const values: Record<string, number | null> = {};
    for (const [name, value] of Object.entries(r.metrics)) {
      const bare = bareName(name);
      values[Object.hasOwn(r.metrics, bare) && bare !== name ? name : bare] = value ?? null;
    }
    values.loss = r.loss ?? values.loss ?? null;
    return values;
  });
  const names = new Set(rows.flatMap((values) => Object.keys(values)));
  names.delete('loss');
  return { columns: ['loss', ...[...names].sort()], rows };
}

export class TestsPanel {
  readonly element = h('section', { class: 'panel tests', 'aria-label': 'Test results' });
  private readonly body = h('div', { class: 'table-scroll' });
  private signature = '';

  constructor() {
    this.element.append(h('h3', {}, 'Test results'), this.body);
  }

  render(results: TestResult[]): void {
    const signature = `${results.length}:${results.at(-1)?.seq ?? 0}`;
    if (signature === this.signature) return;
    this.signature = signature;
    if (results.length === 0) {
      fill(this.body, h('p', { class: 'muted empty-state' }, 'No test run yet: Test (in the header) evaluates the test loader now.'));
      return;
    }
    const { columns, rows } = testTable(results);
    const head = h('tr', {}, ...['label', 'step', ...columns, 'duration'].map((n) => h('th', {}, n)));
    const body = results.map((r, i) =>
      h(
        'tr',
        {},
        h('td', {}, r.label),
        h('td', {}, String(r.step)),
        ...columns.map((n) => h('td', {}, formatNumber(rows[i][n]))),
        h('td', {}, `${formatNumber(r.duration, 3)} s`),
      ),
    );
    fill(this.body, h('table', { 'data-testid': 'tests' }, h('thead', {}, head), h('tbody', {}, ...body)));
  }
}
