/**
 * The fork dialog: train a copy of the paused model on a named selection of the training
 * set for a budget, with optional learning rate, batch size, optimizer state and adapters.
 * It opens from the loss histogram, the data map and the sample table with their selection;
 * the fields are checked before anything is sent (`forkCommand`, in a `CommandDialog`).
 */
import type { CommandBody } from '../../common/messages';
import { h } from '../dom';
import { forkCommand, type ForkForm } from '../forkForms';
import { CommandDialog } from './commandDialog';

/** What to fork on: a selection of run `runKey` (`size`: its samples, when known). */
export interface ForkTarget {
  runKey: string;
  selection: string;
  size: number | null;
}

export class ForkDialog {
  readonly element: HTMLDialogElement;
  private readonly slice = h('p', { class: 'muted dialog-text' });
  private readonly name = h('input', { type: 'text', placeholder: 'fork-<n>', 'aria-label': 'Fork name', 'data-testid': 'fork-name', size: 20 });
  private readonly amount = h('input', { type: 'number', min: 1, step: 1, value: 200, class: 'budget', 'aria-label': 'Budget', 'data-testid': 'fork-budget' });
  private readonly unit = h('select', { 'aria-label': 'Budget unit', 'data-testid': 'fork-unit' }, h('option', { value: 'steps' }, 'steps'), h('option', { value: 'epochs' }, 'epochs'));
  private readonly lr = h('input', { type: 'text', placeholder: "the run's", 'aria-label': 'Learning rate', 'data-testid': 'fork-lr', size: 10 });
  private readonly batchSize = h('input', { type: 'text', placeholder: "the loader's", 'aria-label': 'Batch size', size: 10 });
  private readonly optimizer = h('select', { 'aria-label': 'Optimizer state' }, h('option', { value: 'fresh' }, 'fresh (no state)'), h('option', { value: 'clone' }, "clone the run's"));
  private readonly adapterRank = h('input', { type: 'text', placeholder: 'none: train every weight', 'aria-label': 'Adapter rank', size: 10 });
  private readonly dialog: CommandDialog;
  private target: ForkTarget | null = null;

  constructor(onFork: (runKey: string, command: CommandBody) => void) {
    const text = { id: 'fork', action: 'Fork', title: 'Fork a specialist', pauseFirst: 'Pause the run first: a fork trains while its parent is paused.' };
    const fields = h(
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
    );
    this.dialog = new CommandDialog(text, [this.slice, fields], () => forkCommand(this.form()), (command) => {
      this.name.value = '';
      if (this.target) onFork(this.target.runKey, command);
    });
    this.element = this.dialog.element;
  }

  /** Open for `target`; `paused` says whether its run can fork now. */
  open(target: ForkTarget, paused: boolean): void {
    this.target = target;
    const size = target.size !== null ? ` (${target.size} samples)` : '';
    this.slice.textContent = `A copy of the model trains on the selection ${target.selection}${size}; the run itself stays as it is.`;
    this.dialog.show(paused);
    this.amount.focus();
  }

  /** The run of the open dialog is paused (a fork can start) or not. */
  setPaused(paused: boolean): void {
    this.dialog.setPaused(paused);
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
}
