/**
 * What the compare and merge panels share: the latest reply of their long command for each
 * run, read and kept, and the panel's caption, body and ack line for the run shown. The ack
 * line says the command is pending, then what went wrong (it failed, was cancelled, or its
 * reply cannot be read) or what the panel says of the reply.
 */
import type { Outcome } from '../../common/messages';
import { fill, h } from '../dom';
import { readReply } from '../sampleReplies';
import { AckLines } from './controls';

/** The panel's parts, and how it reads and draws a reply. */
export interface ReplyView<T> {
  readonly caption: HTMLElement;
  readonly body: HTMLElement;
  readonly ack: HTMLOutputElement;
  /** What the body says while the run shown has no reply. */
  readonly empty: string;
  parse(data: Record<string, unknown>): T;
  /** The caption above a reply. */
  describe(reply: T): string;
  /** The body showing a reply. */
  draw(reply: T): HTMLElement;
}

/** The ack lines of one command: pending (`label…`), cancelled, done. */
export interface ReplyText<T> {
  label: string;
  cancelled: string;
  done(reply: T): string;
}

export class RunReplies<T> {
  readonly acks: AckLines;
  private readonly replies = new Map<string, T>();
  private shown = '';

  constructor(private readonly view: ReplyView<T>) {
    this.acks = new AckLines(view.ack);
    this.draw();
  }

  /** The run shown. */
  get key(): string {
    return this.shown;
  }

  /** Show run `key`: its reply and its ack line. */
  show(key: string): void {
    if (key === this.shown) return;
    this.shown = key;
    this.acks.show(key);
    this.draw();
  }

  /** Follow `outcome` on run `key`'s ack line and keep its reply, unless it failed, was
   * cancelled or cannot be read (the line then says so). */
  async track(key: string, outcome: Promise<Outcome>, text: ReplyText<T>): Promise<void> {
    const result = await this.acks.track(key, text.label, outcome);
    if (!result.ok) return;
    if (result.data.cancelled === true) return this.acks.set(key, text.cancelled, 'error');
    const read = readReply(this.view.parse, result.data);
    if ('error' in read) return this.acks.set(key, read.error, 'error');
    this.replies.set(key, read.value);
    this.acks.set(key, text.done(read.value), 'ok');
    if (key === this.shown) this.draw();
  }

  private draw(): void {
    const reply = this.replies.get(this.shown);
    if (reply === undefined) {
      this.view.caption.textContent = '';
      fill(this.view.body, h('p', { class: 'muted' }, this.view.empty));
      return;
    }
    this.view.caption.textContent = this.view.describe(reply);
    fill(this.view.body, this.view.draw(reply));
  }
}
