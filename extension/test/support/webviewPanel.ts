/**
 * A stand-in for `vscode.WebviewPanel` whose webview is a Chromium page: messages to the
 * page are delivered in order, a few at a time, as `window.postMessage` events, which is
 * how a VS Code webview receives them.
 */
import type { Page } from 'playwright-core';
import type { HostToView, ViewToHost } from '../../src/common/messages';

type Listener<T> = (value: T) => void;

export class FakeWebviewPanel {
  readonly visible = true;
  private receive: Listener<ViewToHost> | null = null;
  private disposeListeners: (() => void)[] = [];
  private queue: HostToView[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private disposed = false;

  readonly webview = {
    options: {},
    html: '',
    cspSource: 'vscode-webview-resource:',
    asWebviewUri: (uri: unknown) => uri,
    onDidReceiveMessage: (listener: Listener<ViewToHost>) => {
      this.receive = listener;
      return { dispose: () => (this.receive = null) };
    },
    postMessage: (message: HostToView): Promise<boolean> => {
      if (this.disposed) return Promise.resolve(false);
      this.queue.push(message);
      if (this.queue.length === 1) this.flushing = this.flushing.then(() => this.flush());
      return Promise.resolve(true);
    },
  };

  constructor(private readonly page: Page) {}

  fromPage(message: ViewToHost): void {
    this.receive?.(message);
  }

  onDidDispose(listener: () => void): { dispose(): void } {
    this.disposeListeners.push(listener);
    return { dispose: () => undefined };
  }

  onDidChangeViewState(): { dispose(): void } {
    return { dispose: () => undefined };
  }

  reveal(): void {}

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const listener of this.disposeListeners) listener();
  }

  private async flush(): Promise<void> {
    await new Promise((r) => setTimeout(r, 20));
    const batch = this.queue.splice(0);
    if (!batch.length || this.disposed) return;
    try {
      await this.page.evaluate((messages) => {
        for (const m of messages) window.postMessage(m, '*');
      }, batch);
    } catch {
      // The page is reloading: VS Code drops messages to a webview that is not live either.
    }
  }
}
