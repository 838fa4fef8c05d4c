/**
 * Real training processes for the end-to-end tests. The command is `ONTHEFLY_E2E_CMD`
 * (run by bash in extension/), by default the synthetic producer `examples/demo.py`. Each
 * process prints `[onthefly] dashboard: http://127.0.0.1:PORT/?token=…`; every process is
 * started in its own process group and the whole group is killed afterwards.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const EXTENSION_DIR = join(__dirname, '..', '..', '..');
export const E2E_CMD = process.env.ONTHEFLY_E2E_CMD ?? '../.venv/bin/python ../examples/demo.py';
const URL_LINE = /\[onthefly\] dashboard: (http:\/\/127\.0\.0\.1:(\d+)\/\?token=\S+)/;

export interface Training {
  url: string;
  port: number;
  child: ChildProcess;
  output(): string;
  kill(): Promise<void>;
}

export function tempHome(): string {
  return mkdtempSync(join(tmpdir(), 'otf-e2e-home-'));
}

/** Start one training process with `home` as ONTHEFLY_HOME; resolves once it printed its address. */
export function startTraining(home: string, env: Record<string, string> = {}, command = E2E_CMD): Promise<Training> {
  const child = spawn('bash', ['-c', `exec ${command}`], {
    cwd: EXTENSION_DIR,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ONTHEFLY_HOME: home, ONTHEFLY_PORT: '0', PYTHONUNBUFFERED: '1', ...env },
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-(child.pid as number), 'SIGINT');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        // already gone
      }
    }, 5000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void kill();
      reject(new Error(`no dashboard address within 60 s from \`${command}\`; output:\n${output}`));
    }, 60_000);
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = URL_LINE.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1], port: Number(match[2]), child, output: () => output, kill });
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`\`${command}\` exited with ${code} before printing its address:\n${output}`));
    });
  });
}

export const PYTHON = '../.venv/bin/python';
export const ONTHEFLY_CLI = join(EXTENSION_DIR, '..', '.venv', 'bin', 'onthefly');
/** The small training with faults on request (`test/e2e/fixtures/watched_run.py`). */
export const WATCHED_RUN = `${PYTHON} test/e2e/fixtures/watched_run.py`;

/** A watched run with these options (see the fixture's `--help`). */
export function startWatched(home: string, options: string, env: Record<string, string> = {}): Promise<Training> {
  return startTraining(home, env, `${WATCHED_RUN} ${options}`);
}

/** `onthefly dashboard`: the hub of `home` on any free port. */
export function startHub(home: string, extra = ''): Promise<Training> {
  return startTraining(home, {}, `${PYTHON} -m onthefly dashboard --port 0 ${extra}`);
}

/** The `onthefly` CLI of the repository's environment, in `home`; resolves with its stdout. */
export function cli(home: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(ONTHEFLY_CLI, args, { env: { ...process.env, ONTHEFLY_HOME: home } }, (error, stdout, stderr) =>
      error ? reject(new Error(`onthefly ${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout),
    );
  });
}

/** `onthefly view FILE`: an exported session served read-only, found like a live one. */
export function viewSession(home: string, file: string): Promise<Training> {
  return startTraining(home, {}, `../.venv/bin/python -m onthefly view ${JSON.stringify(file)} --port 0`);
}
