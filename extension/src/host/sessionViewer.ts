/**
 * Opening an exported session file (`.otf`) in the dashboard: `onthefly view FILE` serves its
 * history read-only like a live session (it writes a discovery file, so the session watcher
 * finds it and the dashboard shows its runs as finished). The process runs with the Python
 * of the `onthefly.python` setting and the same OnTheFly home the extension watches; it is
 * ended when the same file is opened again, or when the extension deactivates.
 */
import type { ChildProcess } from 'node:child_process';
import { Disposable, toDisposable } from './disposable';
import { startServer, stopServer } from './pythonServer';

export interface ViewerOptions {
  /** The Python executable with OnTheFly installed (`onthefly.python`, default `python3`). */
  python(): string;
  /** The OnTheFly home (`ONTHEFLY_HOME`) the viewer registers its session in. */
  home(): string;
  /** Seconds to wait for the viewer's address. */
  timeoutS?: number;
}

export interface Viewing {
  file: string;
  url: string;
  port: number;
  pid: number;
}

export class SessionViewer extends Disposable {
  private readonly children = new Map<string, ChildProcess>();

  constructor(private readonly options: ViewerOptions) {
    super();
    this.register(toDisposable(() => this.children.forEach((child) => stopServer(child))));
  }

  /**
   * Serve `file` read-only; resolves once the viewer printed its address.
   *
   * Throws (rejects): Error with the command and its output when it exits or stays silent.
   */
  async open(file: string): Promise<Viewing> {
    const earlier = this.children.get(file);
    if (earlier) stopServer(earlier);
    const served = await startServer(this.options.python(), ['view', file, '--port', '0'], this.options.home(), this.options.timeoutS);
    const child = served.child;
    this.children.set(file, child);
    child.once('exit', () => {
      if (this.children.get(file) === child) this.children.delete(file);
    });
    return { file, url: served.url, port: served.port, pid: served.pid };
  }
}
