/**
 * Opening an exported session file (`.otf`) in the dashboard: `onthefly view FILE` serves its
 * history read-only like a live session (it writes a discovery file, so the session watcher
 * finds it and the dashboard shows its runs as finished). The process runs with the Python
 * of the `onthefly.python` setting and the same OnTheFly home the extension watches; it is
 * ended when the same file is opened again, or when the extension deactivates.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Disposable, toDisposable } from './disposable';

const URL_LINE = /\[onthefly\] dashboard: (http:\/\/127\.0\.0\.1:(\d+)\/\?token=\S+)/;

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
    this.register(toDisposable(() => this.children.forEach((child) => stop(child))));
  }

  /**
   * Serve `file` read-only; resolves once the viewer printed its address.
   *
   * Throws (rejects): Error with the command and its output when it exits or stays silent.
   */
  open(file: string): Promise<Viewing> {
    const earlier = this.children.get(file);
    if (earlier) stop(earlier);
    const python = this.options.python();
    const args = ['-m', 'onthefly', 'view', file, '--port', '0'];
    const child = spawn(python, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ONTHEFLY_HOME: this.options.home(), PYTHONUNBUFFERED: '1' },
    });
    this.children.set(file, child);
    child.once('exit', () => {
      if (this.children.get(file) === child) this.children.delete(file);
    });
    const command = `${python} ${args.join(' ')}`;
    return new Promise((resolve, reject) => {
      let output = '';
      const fail = (why: string): void => {
        clearTimeout(timer);
        stop(child);
        reject(new Error(`\`${command}\` ${why}${output.trim() ? `:\n${output.trim()}` : ''}`));
      };
      const timer = setTimeout(() => fail(`printed no dashboard address within ${this.options.timeoutS ?? 60} s`), (this.options.timeoutS ?? 60) * 1000);
      const read = (chunk: Buffer): void => {
        output += chunk.toString();
        const match = URL_LINE.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve({ file, url: match[1], port: Number(match[2]), pid: child.pid ?? -1 });
        }
      };
      child.stdout?.on('data', read);
      child.stderr?.on('data', read);
      child.once('error', (err) => fail(`could not start (${err.message}); set "onthefly.python" to a Python with OnTheFly installed`));
      child.once('exit', (code) => fail(`exited with ${code}`));
    });
  }
}

function stop(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
}
