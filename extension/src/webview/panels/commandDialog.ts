/**
 * The frame of the fork and merge dialogs: a modal form whose fields are checked before
 * anything is sent, an error line for a field that does not check, Cancel, and a submit
 * button that only a paused run enables (a hint says why while it is not).
 */
import type { CommandBody } from '../../common/messages';
import { h } from '../dom';
import type { Checked } from '../forkForms';

export interface DialogText {
  /** The test ids' prefix: `<id>-dialog`, `<id>-error`, `<id>-submit`. */
  id: string;
  /** The dialog's label and its submit button's text. */
  action: string;
  /** The form's heading. */
  title: string;
  /** Shown while the run is not paused. */
  pauseFirst: string;
}

export class CommandDialog {
  readonly element: HTMLDialogElement;
  private readonly hint: HTMLParagraphElement;
  private readonly error: HTMLOutputElement;
  private readonly submit: HTMLButtonElement;

  /**
   * `fields` stand between the heading and the hint. On submit `check` reads them: its error
   * is shown, or the dialog closes and its command goes to `send`.
   */
  constructor(text: DialogText, fields: Node[], check: () => Checked, send: (command: CommandBody) => void) {
    this.element = h('dialog', { class: 'otf-dialog', 'data-testid': `${text.id}-dialog`, 'aria-label': text.action });
    this.hint = h('p', { class: 'muted dialog-text', hidden: true }, text.pauseFirst);
    this.error = h('output', { class: 'ack error', 'data-testid': `${text.id}-error`, 'aria-live': 'polite' });
    this.submit = h('button', { type: 'submit', 'data-testid': `${text.id}-submit` }, text.action);
    const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
    cancel.addEventListener('click', () => this.element.close());
    const form = h(
      'form',
      { method: 'dialog', novalidate: true },
      h('h3', {}, text.title),
      ...fields,
      this.hint,
      this.error,
      h('div', { class: 'dialog-buttons' }, cancel, this.submit),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const checked = check();
      if ('error' in checked) {
        this.error.value = checked.error;
        return;
      }
      this.element.close();
      send(checked.command);
    });
    this.element.append(form);
  }

  /** Open (if it is not) without an error, for a run that is `paused` or not. */
  show(paused: boolean): void {
    this.error.value = '';
    this.setPaused(paused);
    if (!this.element.open) this.element.showModal();
  }

  /** The dialog's run is paused (its command can be sent) or not. */
  setPaused(paused: boolean): void {
    this.submit.disabled = !paused;
    this.hint.hidden = paused;
  }
}
