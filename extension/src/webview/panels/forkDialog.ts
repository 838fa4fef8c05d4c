/**
 * The fork dialog: train a copy of the paused model on a named selection of the training
 * set for a budget, with optional learning rate, batch size, optimizer state and adapters.
 * It opens from the loss histogram, the data map and the sample table with their selection;
 * the fields are checked before anything is sent (`forkCommand`).
 */
import type { CommandBody } from '../../common/messages';
import { h } from '../dom';
import { forkCommand, type ForkForm } from '../forkForms';

/** What to fork on: a selection of run `runKey` (`size`: its samples, when known). */
export interface ForkTarget {
  runKey: string;
  selection: string;
  size: number | null;
}

export class ForkDialog {
  readonly element = h('dialog', { class: 'otf-dialog', 'data-testid': 'fork-dialog', 'aria-label': 'Fork' });
  private readonly slice = h('p', { class: 'muted dialog-text' });
  private readonly name = h('input', { type: 'text', placeholder: 'fork-<n>', 'aria-label': 'Fork name', 'data-testid': 'fork-name', size: 20 });
  private readonly amount = h('input', { type: 'number', min: 1, step: 1, value: 200, class: 'budget', 'aria-label': 'Budget', 'data-testid': 'fork-budget' });
  private readonly unit = h('select', { 'aria-label': 'Budget unit', 'data-testid': 'fork-unit' }, h('option', { value: 'steps' }, 'steps'), h('option', { value: 'epochs' }, 'epochs'));
  private readonly lr = h('input', { type: 'text', placeholder: "the run's", 'aria-label': 'Learning rate', 'data-testid': 'fork-lr', size: 10 });
  private readonly batchSize = h('input', { type: 'text', placeholder: "the loader's", 'aria-label': 'Batch size', size: 10 });
  private readonly optimizer = h('select', { 'aria-label': 'Optimizer state' }, h('option', { value: 'fresh' }, 'fresh (no state)'), h('option', { value: 'clone' }, "clone the run's"));
  private readonly adapterRank = h('input', { type: 'text', placeholder: 'none: train every weight', 'aria-label': 'Adapter rank', size: 10 });
  private readonly hint = h('p', { class: 'muted dialog-text', hidden: true }, 'Pause the run first: a fork trains while its parent is paused.');
  private readonly error = h('output', { class: 'ack error', 'data-testid': 'fork-error', 'aria-live': 'polite' });
  private readonly submit = h('button', { type: 'submit', 'data-testid': 'fork-submit' }, 'Fork');
  private target: ForkTarget | null = null;

  constructor(private readonly onFork: (runKey: string, command: CommandBody) => void) {
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    cancel.addEventListener('click', () => this.element.close());
    const form = h(
      'form',
      { method: 'dialog', novalidate: true },
      h('h3', {}, 'Fork a specialist'),
      this.slice,
      h(
        'div',
        { class: 'form-grid' },
        h('label', { class: 'muted' }, 'Name'),
        this.name,
        h('label', { class: 'muted' }, 'Budget'),
        h('span', { class: 'inline' }, this.amount, this.unit),
        h('label', { class: 'muted' }, 'Learning rate'),
        this.lr,
        h('label', { class: 'muted' }, 'Batch size'),
        this.batchSize,
        h('label', { class: 'muted' }, 'Optimizer'),
        this.optimizer,
        h('label', { class: 'muted', title: 'Train only low-rank adapters on the Linear layers (for adapter merges)' }, 'Adapter rank'),
        this.adapterRank,
      ),
      this.hint,
      this.error,
      h('div', { class: 'dialog-buttons' }, cancel, this.submit),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.send();
    });
    this.element.append(form);
  }

  /** Open for `target`; `paused` says whether its run can fork now. */
  open(target: ForkTarget, paused: boolean): void {
    this.target = target;
    const size = target.size !== null ? ` (${target.size} samples)` : '';
    this.slice.textContent = `A copy of the model trains on the selection ${target.selection}${size}; the run itself stays as it is.`;
    this.error.value = '';
    this.setPaused(paused);
    if (!this.element.open) this.element.showModal();
    this.amount.focus();
  }

  /** The run of the open dialog is paused (a fork can start) or not. */
  setPaused(paused: boolean): void {
    this.submit.disabled = !paused;
    this.hint.hidden = paused;
  }

  get runKey(): string | null {
    return this.element.open ? (this.target?.runKey ?? null) : null;
  }

  private form(): ForkForm {
    return {
      selection: this.target?.selection ?? '',
      name: this.name.value,
      amount: this.amount.value,
      unit: this.unit.value as ForkForm['unit'],
      lr: this.lr.value,
      batchSize: this.batchSize.value,
      optimizer: this.optimizer.value as ForkForm['optimizer'],
      adapterRank: this.adapterRank.value,
    };
  }

  private send(): void {
    const target = this.target;
    if (!target) return;
    const checked = forkCommand(this.form());
    if ('error' in checked) {
      this.error.value = checked.error;
      return;
    }
    this.element.close();
    this.name.value = '';
    this.onFork(target.runKey, checked.command);
  }
}
