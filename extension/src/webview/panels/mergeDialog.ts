/**
 * The merge dialog: which finished forks to merge into the paused model, by which method
 * (uniform or greedy soup, Fisher-weighted average, distillation, adapter folding), with
 * the method's settings. The fields are checked before anything is sent (`mergeCommand`, in
 * a `CommandDialog`).
 */
import type { CommandBody } from '../../common/messages';
import type { LineageView, LineageNode } from '../../protocol.gen';
import { fill, h } from '../dom';
import { MERGE_METHODS, mergeCommand, type MergeForm, type MergeMethod } from '../forkForms';
import { mergeableForks } from '../forkText';
import { CommandDialog } from './commandDialog';

const METHOD_HELP: Record<MergeMethod, string> = {
  soup: 'average of the parent and the forks, BatchNorm statistics recomputed',
  greedy: 'forks added in order of validation loss, each kept only if it lowers it',
  fisher: 'average weighted by each model’s diagonal Fisher on its own data',
  distill: 'the parent trained toward the forks’ outputs on their slices',
  adapter: 'the forks’ low-rank adapter updates folded into the parent (adapter forks only)',
};

export class MergeDialog {
  readonly element: HTMLDialogElement;
  private readonly method = h('select', { 'aria-label': 'Merge method', 'data-testid': 'merge-method' }, ...MERGE_METHODS.map((m) => h('option', { value: m }, m)));
  private readonly help = h('p', { class: 'muted dialog-text' });
  private readonly forks = h('div', { class: 'fork-choices', 'data-testid': 'merge-forks' });
  private readonly name = h('input', { type: 'text', placeholder: 'merge-<n>', 'aria-label': 'Merge name', size: 20 });
  private readonly optimizer = h('select', { 'aria-label': 'Optimizer state after the merge' }, h('option', { value: 'keep' }, 'keep as it is'), h('option', { value: 'reset' }, 'reset (empty)'));
  private readonly weights = h('input', { type: 'text', placeholder: 'chosen on validation', 'aria-label': 'Weights', size: 20 });
  private readonly weightsRow: HTMLElement[];
  private readonly steps = h('input', { type: 'text', value: '100', 'aria-label': 'Distillation steps', size: 10 });
  private readonly lr = h('input', { type: 'text', placeholder: "the run's", 'aria-label': 'Distillation learning rate', size: 10 });
  private readonly temperature = h('input', { type: 'text', value: '', placeholder: 'chosen on validation', 'aria-label': 'Temperature', size: 10 });
  private readonly distillRows: HTMLElement[];
  private readonly dialog: CommandDialog;
  private runKey = '';
  private lineage: LineageView | null = null;

  constructor(onMerge: (runKey: string, command: CommandBody) => void) {
    const label = (text: string): HTMLElement => h('label', { class: 'muted' }, text);
    this.weightsRow = [label('Weights'), this.weights];
    this.distillRows = [label('Steps'), this.steps, label('Learning rate'), this.lr, label('Temperature'), this.temperature];
    const text = { id: 'merge', action: 'Merge', title: 'Merge forks into the run', pauseFirst: 'Pause the run first: a merge replaces the paused model’s weights.' };
    const fields = [
      h(
        'div',
        { class: 'form-grid' },
        label('Method'),
        this.method,
        h('span', {}),
        this.help,
        label('Forks'),
        this.forks,
        label('Name'),
        this.name,
        label('Optimizer'),
        this.optimizer,
        ...this.weightsRow,
        ...this.distillRows,
      ),
      h('p', { class: 'muted dialog-text' }, 'The merged weights replace the paused model’s; Discard undoes it until training resumes.'),
    ];
    this.dialog = new CommandDialog(text, fields, () => mergeCommand(this.form()), (command) => {
      this.name.value = '';
      onMerge(this.runKey, command);
    });
    this.element = this.dialog.element;
    this.method.addEventListener('change', () => this.methodChanged());
  }

  /** Open for run `runKey` with its lineage (the forks to choose from). */
  open(runKey: string, lineage: LineageView | null, paused: boolean): void {
    this.runKey = runKey;
    this.lineage = lineage;
    this.methodChanged();
    this.dialog.show(paused);
  }

  setPaused(paused: boolean): void {
    this.dialog.setPaused(paused);
  }

  get openFor(): string | null {
    return this.element.open ? this.runKey : null;
  }

  private methodChanged(): void {
    const method = this.method.value as MergeMethod;
    this.help.textContent = METHOD_HELP[method];
    const weighted = method === 'soup' || method === 'adapter';
    for (const el of this.weightsRow) el.hidden = !weighted;
    for (const el of this.distillRows) el.hidden = method !== 'distill';
    const checked = new Set(this.chosen());
    const forks = mergeableForks(this.lineage, method);
    if (forks.length === 0) {
      fill(this.forks, h('span', { class: 'muted' }, method === 'adapter' ? 'no finished fork with adapters' : 'no finished fork yet'));
      return;
    }
    fill(this.forks, ...forks.map((node) => this.choice(node, checked.size === 0 || checked.has(node.name))));
  }

  private choice(node: LineageNode, checked: boolean): HTMLElement {
    const box = h('input', { type: 'checkbox', value: node.name, checked });
    const size = typeof node.selection?.size === 'number' ? ` · ${node.selection.size} samples` : '';
    return h('label', { class: 'fork-choice' }, box, ` ${node.name}`, h('span', { class: 'muted' }, ` @ ${node.parent_step ?? '?'}${size}`));
  }

  private chosen(): string[] {
    return [...this.forks.querySelectorAll<HTMLInputElement>('input[type=checkbox]')].filter((b) => b.checked).map((b) => b.value);
  }

  private form(): MergeForm {
    return {
      method: this.method.value as MergeMethod,
      forks: this.chosen(),
      name: this.name.value,
      weights: this.weights.hidden ? '' : this.weights.value,
      optimizer: this.optimizer.value as MergeForm['optimizer'],
      steps: this.steps.value,
      lr: this.lr.value,
      temperature: this.temperature.value,
    };
  }
}
