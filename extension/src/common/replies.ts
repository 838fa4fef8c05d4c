/**
 * The typed data of a command's reply. The reply to a command of type `K` is `Replies[K]`,
 * generated from the protocol's reply models (`REPLIES` in onthefly/protocol.py); the server
 * builds every reply from that model, and the schema tests of both suites keep the two sides
 * in step. These helpers only narrow the type: they neither copy nor check.
 */
import type { Cancelled, Replies } from '../protocol.gen';
import type { Outcome } from './messages';

export type CommandType = keyof Replies;

/** The data of the reply to a `K` command. */
export type ReplyOf<K extends CommandType> = Replies[K];

/** The outcome of a `K` command. */
export type OutcomeOf<K extends CommandType> = Outcome<ReplyOf<K>>;

/** `outcome`, read as the outcome of a `kind` command. */
export function replyOf<K extends CommandType>(kind: K, outcome: Outcome): OutcomeOf<K> {
  void kind; // names the reply model at the call site; the server chose it by the command
  return outcome as unknown as OutcomeOf<K>;
}

/** Whether a scan, comparison or merge was stopped by `cancel` instead of finishing. */
export function isCancelled<T extends object>(data: T | Cancelled): data is Cancelled {
  return (data as { cancelled?: unknown }).cancelled === true;
}
