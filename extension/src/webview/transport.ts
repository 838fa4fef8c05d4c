/**
 * How the page reaches sessions. Inside VS Code the extension host holds the connections
 * and relays (`VsCodeTransport`); in a browser the page connects itself (`SocketTransport`).
 * Both deliver the same `HostToView` messages, so the rest of the page cannot tell them apart.
 */
import type { CommandBody, HostToView, Outcome, PathPurpose } from '../common/messages';

export interface Transport {
  /** Start delivering messages to `receive`. */
  start(receive: (message: HostToView) => void): void;
  /** Send a command to a run of the session `source`; resolves with its one outcome. */
  request(source: string, command: CommandBody): Promise<Outcome>;
  /**
   * Ask the user for a session file with the editor's own dialog; absent where the page has
   * none (a browser tab cannot learn a path on the training machine: it asks in a text field).
   */
  choosePath?(purpose: PathPurpose, suggested: string): Promise<string | null>;
  /** Offer a chart image for saving. */
  savePng(name: string, dataUrl: string): void;
  /** The run the page was opened for (`?run=name` or `project/name`), if any. */
  wantedRun?(): string | null;
  /** UI-only state (selection, filters) that survives a reload of the page. */
  loadUiState(): unknown;
  saveUiState(state: unknown): void;
}
