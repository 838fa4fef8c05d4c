/**
 * Pause / Resume / Stop / Test / Extend for the selected run. Each click shows its outcome:
 * the server's acknowledgement with the step it took effect at, or its error.
 */
import type { CommandBody, Outcome } from '../../common/messages';
import type { Pill } from '../../common/state';
import { h } from '../dom';

export type Send = (command: CommandBody) => Promise<Outcome>;

/** What a reply says, e.g. `paused at step 120 (epoch 1)`. */
export function describeOutcome(command: string, outcome: Outcome): string {
  if (!outcome.ok) return `${command} failed: ${outcome.message} (${outcome.code})`;
  const { state, step, epoch } = outcome.data as { state?: unknown; step?: unknown; epoch?: unknown };
  const parts = [`${command}: ${typeof state === 'string' ? state : 'ok'}`];
  if (typeof step === 'number') parts.push(`at step ${step}`);
  if (typeof epoch === 'number') parts.push(`(epoch ${epoch})`);
  return parts.join(' ');
}

export class Controls {
  readonly element = h('section', { class: 'controls', 'aria-label': 'Run controls' });
  private readonly buttons: Record<'pause' | 'resume' | 'stop' | 'test' | 'extend', HTMLButtonElement>;
  private readonly amount = h('input', { type: 'number', min: 1, value: 1, class: 'extend-amount', 'aria-label': 'Extend by' });
  private readonly unit = h('select', { 'aria-label': 'Extend unit' }, h('option', { value: 'epochs' }, 'epochs'), h('option', { value: 'steps' }, 'steps'));
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'ack', 'aria-live': 'polite' });
  private stopArmed: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly send: Send) {
    const button = (label: string, title: string): HTMLButtonElement =>
      h('button', { class: 'control', title, 'data-testid': label.toLowerCase() }, label);
    this.buttons = {
      pause: button('Pause', 'Pause at the next batch boundary'),
      resume: button('Resume', 'Resume training'),
      stop: button('Stop', 'Stop the run (click twice)'),
      test: button('Test', 'Evaluate the test set at the next boundary'),
      extend: button('Extend', 'Train for more epochs or steps'),
    };
    this.buttons.pause.addEventListener('click', () => this.run({ type: 'pause' }));
    this.buttons.resume.addEventListener('click', () => this.run({ type: 'resume' }));
    this.buttons.test.addEventListener('click', () => this.run({ type: 'test' }));
    this.buttons.stop.addEventListener('click', () => this.stop());
    this.buttons.extend.addEventListener('click', () => this.extend());
    this.element.append(
      this.buttons.pause,
      this.buttons.resume,
      this.buttons.stop,
      this.buttons.test,
      h('span', { class: 'extend' }, this.amount, this.unit, this.buttons.extend),
      this.ack,
    );
  }

  render(state: Pill | null): void {
    const connected = state !== null && state !== 'disconnected';
    const live = connected && state !== 'finished';
    this.buttons.pause.disabled = !live || state === 'paused';
    this.buttons.resume.disabled = !live || state !== 'paused';
    this.buttons.stop.disabled = !live;
    this.buttons.test.disabled = !live;
    // A run that reached its end may still be extended while its process waits.
    this.buttons.extend.disabled = !connected;
  }

  private run(command: CommandBody): void {
    this.ack.value = `${command.type}…`;
    this.ack.className = 'ack pending';
    void this.send(command).then((outcome) => {
      this.ack.value = describeOutcome(command.type, outcome);
      this.ack.className = outcome.ok ? 'ack ok' : 'ack error';
    });
  }

  /** Stopping cannot be undone: the first click arms, a second within 3 s stops. */
  private stop(): void {
    if (this.stopArmed) {
      clearTimeout(this.stopArmed);
      this.stopArmed = null;
      this.buttons.stop.textContent = 'Stop';
      this.run({ type: 'stop' });
      return;
    }
    this.buttons.stop.textContent = 'Confirm stop';
    this.stopArmed = setTimeout(() => {
      this.stopArmed = null;
      this.buttons.stop.textContent = 'Stop';
    }, 3000);
  }

  private extend(): void {
    const amount = Number(this.amount.value);
    if (!Number.isInteger(amount) || amount < 1) {
      this.ack.value = `extend: "${this.amount.value}" is not a whole number of ${this.unit.value} >= 1`;
      this.ack.className = 'ack error';
      return;
    }
    this.run(this.unit.value === 'steps' ? { type: 'resume', steps: amount } : { type: 'resume', epochs: amount });
  }
}
