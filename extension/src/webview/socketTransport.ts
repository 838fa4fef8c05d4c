/**
 * The page in a browser, served by a session server at `http://127.0.0.1:PORT/?token=…`:
 * it connects to that server itself, with the token read from its own address.
 */
import { Connection, type SocketLike } from '../common/connection';
import type { CommandBody, HostToView, Outcome } from '../common/messages';
import type { Transport } from './transport';

const UI_STATE_KEY = 'onthefly.ui';

export class SocketTransport implements Transport {
  private connection: Connection | null = null;
  private readonly key: string;

  /**
   * Args: `location` is the page's address; its `token` query parameter authenticates.
   * Throws: Error when the address has no token (the page was opened without one).
   */
  constructor(
    private readonly location: Pick<Location, 'host' | 'search'>,
    private readonly storage: Pick<Storage, 'getItem' | 'setItem'> = sessionStorage,
  ) {
    this.key = location.host;
  }

  start(receive: (message: HostToView) => void): void {
    const token = new URLSearchParams(this.location.search).get('token');
    const source = this.key;
    const announce = (status: 'connecting' | 'open' | 'closed', label = source): void =>
      receive({ type: 'source', source, label, status, ended: false });
    if (!token) {
      announce('closed');
      throw new Error(
        'this page needs its session token: open the address the training script printed ' +
          '(http://127.0.0.1:PORT/?token=…)',
      );
    }
    const url = `ws://${this.location.host}/?token=${encodeURIComponent(token)}`;
    let label = source;
    this.connection = new Connection(() => new WebSocket(url) as unknown as SocketLike, {
      status: (status) => announce(status, label),
      message: (message) => {
        if (message.type === 'hello') {
          label = message.project;
          announce('open', label);
        }
        receive({ type: 'server', source, message });
      },
      warn: (text) => console.warn(`OnTheFly: ${text}`),
    });
    this.connection.start();
  }

  request(source: string, command: CommandBody): Promise<Outcome> {
    if (source !== this.key || !this.connection) {
      return Promise.resolve({ ok: false, code: 'unknown_session', message: `no session ${source}` });
    }
    return this.connection.request(command);
  }

  savePng(name: string, dataUrl: string): void {
    const link = document.createElement('a');
    link.href = dataUrl;
    link.download = name;
    link.click();
  }

  loadUiState(): unknown {
    try {
      return JSON.parse(this.storage.getItem(UI_STATE_KEY) ?? 'null');
    } catch {
      return null;
    }
  }

  saveUiState(state: unknown): void {
    this.storage.setItem(UI_STATE_KEY, JSON.stringify(state));
  }
}
