/** The page inside a VS Code webview: the extension host relays everything. */
import type { CommandBody, HostToView, Outcome, PathPurpose, ViewToHost } from '../common/messages';
import type { Transport } from './transport';

/** What `acquireVsCodeApi()` returns. */
export interface VsCodeApi {
  postMessage(message: ViewToHost): void;
  getState(): unknown;
  setState(state: unknown): void;
}

export class VsCodeTransport implements Transport {
  private nextId = 1;
  private readonly waiting = new Map<number, (outcome: Outcome) => void>();
  private readonly picking = new Map<number, (path: string | null) => void>();

  constructor(
    private readonly api: VsCodeApi,
    private readonly target: Pick<Window, 'addEventListener'> = window,
  ) {}

  start(receive: (message: HostToView) => void): void {
    this.target.addEventListener('message', (event: Event) => {
      const message = (event as MessageEvent<HostToView>).data;
      if (message.type === 'result') {
        this.waiting.get(message.requestId)?.(message.outcome);
        this.waiting.delete(message.requestId);
      } else if (message.type === 'path') {
        this.picking.get(message.requestId)?.(message.path);
        this.picking.delete(message.requestId);
      } else {
        receive(message);
      }
    });
    this.api.postMessage({ type: 'ready' });
  }

  request(source: string, command: CommandBody): Promise<Outcome> {
    const requestId = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(requestId, resolve);
      this.api.postMessage({ type: 'command', requestId, source, command });
    });
  }

  choosePath(purpose: PathPurpose, suggested: string): Promise<string | null> {
    const requestId = this.nextId++;
    return new Promise((resolve) => {
      this.picking.set(requestId, resolve);
      this.api.postMessage({ type: 'choosePath', requestId, purpose, suggested });
    });
  }

  savePng(name: string, dataUrl: string): void {
    this.api.postMessage({ type: 'savePng', name, dataUrl });
  }

  loadUiState(): unknown {
    return this.api.getState();
  }

  saveUiState(state: unknown): void {
    this.api.setState(state);
  }
}
