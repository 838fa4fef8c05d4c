/** Health checks of the selected run (filled in once runs report them). */
import { h } from '../dom';

export class HealthPanel {
  readonly element = h(
    'section',
    { class: 'panel health', 'aria-label': 'Health checks' },
    h('h3', {}, 'Health'),
    h('p', { class: 'muted', 'data-testid': 'health' }, 'No health checks run yet.'),
  );
}
