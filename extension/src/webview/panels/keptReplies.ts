/**
 * What the compare and merge panels share: the latest finished reply of their long command
 * for each run, kept, and the panel's caption, body and ack line for the run shown. The ack
 * line says the command is pending, then what went wrong (it failed or was cancelled) or what
 * the panel says of the reply.
 */
import type { Outcome } from '../../common/messages';
import { isCancelled, replyOf, type ReplyOf } from '../../common/replies';
import type { Cancelled } from '../../protocol.gen';
import { fill, h } from '../dom';
import { AckLines } from './controls';

/** The long commands whose replies a panel keeps. */
export type KeptCommand = 'compare' | 'merge';

/** A finished reply of command `K` (not the `cancelled` one). */
export type Finished<K extends KeptCommand> = Exclude<ReplyOf<K>, Cancelled>;

/** The panel's parts, and how it draws a reply. */
export interface ReplyView<K extends KeptCommand> {
  readonly command: K;
  readonly caption: HTMLElement;
  readonly body: HTMLElement;
  readonly ack: HTMLOutputElement;
  /** What the body says while the run shown has no reply. */
  readonly empty: string;
  /** The caption above a reply. */
  describe(reply: Finished<K>): string;
  /** The body showing a reply. */
  draw(reply: Finished<K>): HTMLElement;
}

/** The ack lines of one command: pending (`label…`), cancelled, done. */
export interface ReplyText<K extends KeptCommand> {
  label: string;
  cancelled: string;
  done(reply: Finished<K>): string;
}

export class KeptReplies<K extends KeptCommand> {
  readonly acks: AckLines;
  private readonly replies = new Map<string, Finished<K>>();
  private shown = '';

  constructor(private readonly view: ReplyView<K>) {
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

  /** Follow `outcome` on run `key`'s ack line and keep its reply, unless it failed or was
   * cancelled (the line then says so). */
  async track(key: string, outcome: Promise<Outcome>, text: ReplyText<K>): Promise<void> {
    const result = replyOf(this.view.command, await this.acks.track(key, text.label, outcome));
    if (!result.ok) return;
    const data: ReplyOf<K> = result.data;
    if (isCancelled(data)) return this.acks.set(key, text.cancelled, 'error');
    const reply = data as Finished<K>;
    this.replies.set(key, reply);
    this.acks.set(key, text.done(reply), 'ok');
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
