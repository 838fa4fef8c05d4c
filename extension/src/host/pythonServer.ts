/**
 * A server of the Python package run by the extension (`onthefly view FILE`, `onthefly
 * dashboard`): started with the Python of the `onthefly.python` setting and the OnTheFly home
 * the extension watches, ready once it printed its dashboard address.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const URL_LINE = /\[onthefly\] dashboard: (http:\/\/127\.0\.0\.1:(\d+)\/\?token=\S+)/;

export interface Served {
  url: string;
  port: number;
  pid: number;
  child: ChildProcess;
}

/**
 * Run `python -m onthefly ARGS` and resolve with the address it prints.
 *
 * Throws (rejects): Error with the command and its output when it exits or stays silent for
 * `timeoutS` seconds (the process is stopped then).
 */
export function startServer(python: string, args: string[], home: string, timeoutS = 60): Promise<Served> {
  const child = spawn(python, ['-m', 'onthefly', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ONTHEFLY_HOME: home, PYTHONUNBUFFERED: '1' },
  });
  const command = `${python} -m onthefly ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    let output = '';
    const fail = (why: string): void => {
      clearTimeout(timer);
      stopServer(child);
      reject(new Error(`\`${command}\` ${why}${output.trim() ? `:\n${output.trim()}` : ''}`));
    };
    const timer = setTimeout(() => fail(`printed no dashboard address within ${timeoutS} s`), timeoutS * 1000);
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = URL_LINE.exec(output);
      if (match) {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        resolve({ url: match[1], port: Number(match[2]), pid: child.pid ?? -1, child });
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('error', (err) => fail(`could not start (${err.message}); set "onthefly.python" to a Python with OnTheFly installed`));
    child.once('exit', (code) => fail(`exited with ${code}`));
  });
}

/** Stop a server (Ctrl+C: it removes its discovery file and ends cleanly). */
export function stopServer(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
}
