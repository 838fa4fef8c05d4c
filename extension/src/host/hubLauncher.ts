/**
 * The hub (`onthefly dashboard`) from VS Code: the dashboard of every run of this machine in
 * a browser, at one address. A hub already running for the OnTheFly home the extension
 * watches (its `hub.json`, written by the hub, names a live process) is reused; otherwise one
 * is started with the Python of the `onthefly.python` setting, on the hub's usual port (any
 * free one when that is taken), and stopped when the extension deactivates.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive } from './discovery';
import { Disposable, toDisposable } from './disposable';
import { startServer, stopServer } from './pythonServer';

export interface HubOptions {
  python(): string;
  /** The OnTheFly home (its `hub.json`, its `sessions/`). */
  home(): string;
  timeoutS?: number;
}

/** The address of the hub of `home` when its process runs, else `null`. */
export function runningHub(home: string, alive: (pid: number) => boolean = isAlive): string | null {
  try {
    const hub = JSON.parse(readFileSync(join(home, 'hub.json'), 'utf8')) as { pid?: unknown; url?: unknown };
    if (typeof hub.pid === 'number' && hub.pid > 0 && typeof hub.url === 'string' && alive(hub.pid)) return hub.url;
  } catch {
    // no hub yet, or a file being written: start one
  }
  return null;
}

export class HubLauncher extends Disposable {
  private child: ChildProcess | null = null;

  constructor(private readonly options: HubOptions) {
    super();
    this.register(toDisposable(() => this.child && stopServer(this.child)));
  }

  /**
   * The hub's address, starting the hub if none runs.
   *
   * Throws (rejects): Error with the command and its output when the hub cannot start.
   */
  async address(): Promise<string> {
    const home = this.options.home();
    const running = runningHub(home);
    if (running) return running;
    const python = this.options.python();
    let served;
    try {
      served = await startServer(python, ['dashboard'], home, this.options.timeoutS);
    } catch (err) {
      if (!/in use/.test((err as Error).message)) throw err;
      served = await startServer(python, ['dashboard', '--port', '0'], home, this.options.timeoutS);
    }
    this.child = served.child;
    return served.url;
  }
}
