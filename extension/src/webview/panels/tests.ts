/** Test-set evaluations of the selected run, newest last. */
import type { TestResult } from '../../protocol.gen';
import { fill, formatNumber, h } from '../dom';

export class TestsPanel {
  readonly element = h('section', { class: 'panel tests', 'aria-label': 'Test results' });
  private readonly body = h('div', {});
  private signature = '';

  constructor() {
    this.element.append(h('h3', {}, 'Test results'), this.body);
  }

  render(results: TestResult[]): void {
    const signature = `${results.length}:${results.at(-1)?.seq ?? 0}`;
    if (signature === this.signature) return;
    this.signature = signature;
    if (results.length === 0) {
      fill(this.body, h('p', { class: 'muted' }, 'No test run yet: use Test.'));
      return;
    }
    const names = [...new Set(results.flatMap((r) => Object.keys(r.metrics)))].sort();
    const head = h('tr', {}, ...['Label', 'Step', 'Loss', ...names, 'Duration'].map((n) => h('th', {}, n)));
    const rows = results.map((r) =>
      h(
        'tr',
        {},
        h('td', {}, r.label),
        h('td', {}, String(r.step)),
        h('td', {}, formatNumber(r.loss)),
        ...names.map((n) => h('td', {}, formatNumber(r.metrics[n]))),
        h('td', {}, `${formatNumber(r.duration, 3)} s`),
      ),
    );
    fill(this.body, h('table', { 'data-testid': 'tests' }, h('thead', {}, head), h('tbody', {}, ...rows)));
  }
}
