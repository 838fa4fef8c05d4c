/**
 * Pause / Resume / Stop / Test / Extend for the selected run. Each click shows its outcome:
 * the server's acknowledgement with the state it led to and the step it took effect at, or
 * its error — next to the run it was for (switching runs shows the other run's last outcome,
 * not this one's). A stop reads "stopping" until the run has finished, then "stopped".
 */
import type { CommandBody, Outcome } from '../../common/messages';
import type { Pill } from '../../common/state';
import { h } from '../dom';

export type Send = (command: CommandBody) => Promise<Outcome>;

/** The last outcome line of each run, by run key. */
export class AckLines {
  private readonly lines = new Map<string, { text: string; tone: 'pending' | 'ok' | 'error' }>();

  constructor(private readonly output: HTMLOutputElement) {}

  private shown = '';

  /** Show the line of run `key` (empty when it has none). */
  show(key: string): void {
    this.shown = key;
    const line = this.lines.get(key);
    this.output.value = line?.text ?? '';
    this.output.className = `ack ${line?.tone ?? ''}`.trim();
  }

  set(key: string, text: string, tone: 'pending' | 'ok' | 'error'): void {
    this.lines.set(key, { text, tone });
    if (key === this.shown) this.show(key);
  }

  /** Send `command` for run `key`, showing it pending, then its outcome. */
  track(key: string, label: string, outcome: Promise<Outcome>): Promise<Outcome> {
    this.set(key, `${label}…`, 'pending');
    return outcome.then((result) => {
      this.set(key, describeOutcome(label, result), result.ok ? 'ok' : 'error');
      return result;
    });
  }
}

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
  private readonly acks = new AckLines(this.ack);
  private runKey = '';
  private stopArmed: ReturnType<typeof setTimeout> | null = null;
  /** Runs told to stop that have not finished yet. */
  private readonly stopping = new Set<string>();

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

  /** Args: `runKey` names the selected run, whose last outcome the line shows; `step` its step. */
  render(state: Pill | null, runKey: string, step = 0): void {
    if (runKey !== this.runKey) {
      this.runKey = runKey;
      this.acks.show(runKey);
    }
    if (this.stopping.has(runKey) && (state === 'finished' || state === 'disconnected')) {
      this.stopping.delete(runKey);
      this.acks.set(runKey, `stop: stopped at step ${step}`, 'ok');
    }
    const live = state !== null && state !== 'disconnected' && state !== 'finished';
    this.buttons.pause.disabled = !live || state === 'paused';
    this.buttons.resume.disabled = !live || state !== 'paused';
    this.buttons.stop.disabled = !live;
    this.buttons.test.disabled = !live;
    // Extending sets the run's limits from where it stands: meant for a paused run (one
    // that reached its end holds paused), never for one that is still training.
    this.buttons.extend.disabled = state !== 'paused';
  }

  private run(command: CommandBody): void {
    const key = this.runKey;
    void this.acks.track(key, command.type, this.send(command)).then((outcome) => {
      if (command.type === 'stop' && outcome.ok) this.stopping.add(key);
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
      this.acks.set(this.runKey, `extend: "${this.amount.value}" is not a whole number of ${this.unit.value} >= 1`, 'error');
      return;
    }
    this.run(this.unit.value === 'steps' ? { type: 'resume', steps: amount } : { type: 'resume', epochs: amount });
  }
}
