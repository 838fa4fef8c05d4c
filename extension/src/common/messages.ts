/**
 * Messages between the extension host and the dashboard page. They never go on the Python
 * wire: the host relays wire messages inside them, tagged with the session they came from.
 */
import type { Command, ServerMessage } from '../protocol.gen';
import type { ConnectionStatus, DashboardState } from './state';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A command as the dashboard writes it: the connection adds the `id`. */
export type CommandBody = DistributiveOmit<Exclude<Command, { type: 'subscribe' }>, 'id'>;

/**
 * How a command ended: the server's `reply` data, or an error with a code and a message.
 * `T` is the reply's data model (`ReplyOf<K>` of `./replies`, generated from the protocol).
 */
export type Outcome<T = Record<string, unknown>> =
  | { ok: true; data: T }
  | { ok: false; code: string; message: string };

export type HostToView =
  /** Everything the host knows, sent in answer to `ready`. */
  | { type: 'state'; state: DashboardState }
  /** A session appeared or its connection changed. */
  | { type: 'source'; source: string; label: string; status: ConnectionStatus; ended: boolean }
  /** A wire message of one session. */
  | { type: 'server'; source: string; message: ServerMessage }
  /** The outcome of the page's command `requestId`. */
  | { type: 'result'; requestId: number; outcome: Outcome }
  /** The file the user picked for the page's `choosePath` `requestId` (`null`: cancelled). */
  | { type: 'path'; requestId: number; path: string | null }
  /**
   * What the page's own transport has to say about where it gets its runs from (its run
   * ended and where to go on, say); empty text takes a notice back.
   */
  | { type: 'notice'; text: string };

/**
 * What a path is picked for: writing a session export, loading a session file into a run,
 * or the folder a selection of samples is exported to.
 */
export type PathPurpose = 'export' | 'import' | 'folder';

export type ViewToHost =
  | { type: 'ready' }
  | { type: 'command'; requestId: number; source: string; command: CommandBody }
  | { type: 'savePng'; name: string; dataUrl: string }
  | { type: 'choosePath'; requestId: number; purpose: PathPurpose; suggested: string };
