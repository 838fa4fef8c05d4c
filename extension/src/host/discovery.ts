/**
 * Finding live sessions: every session server writes
 * `$ONTHEFLY_HOME/sessions/<pid>-<port>.json` (pid, port, token, project, run, started_at)
 * and removes it when it ends. Files of processes that no longer exist are ignored, the
 * folder is watched, and a periodic rescan catches what watching misses (a folder created
 * later, a process killed without clean-up, file systems without change events).
 */
import { existsSync, readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Disposable, toDisposable } from './disposable';

export interface SessionFile {
  /** `<pid>-<port>`: the file name without `.json`. */
  key: string;
  pid: number;
  port: number;
  token: string;
  project: string;
  run: string;
  started_at: number;
}

/**
 * The folder of discovery files: `<home>/sessions`, where home is the `onthefly.home`
 * setting when set, else `$ONTHEFLY_HOME`, else `~/.onthefly`.
 */
export function sessionsDir(home?: string, env: NodeJS.ProcessEnv = process.env): string {
  const base = home?.trim() || env.ONTHEFLY_HOME || join(homedir(), '.onthefly');
  return join(base, 'sessions');
}

/** Whether process `pid` exists (EPERM: it exists but belongs to another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Parse one discovery file.
 *
 * Throws: Error naming the file and the missing or ill-typed key.
 */
export function parseSessionFile(key: string, text: string): SessionFile {
  const data: unknown = JSON.parse(text);
  if (typeof data !== 'object' || data === null) {
    throw new Error(`${key}.json is not a JSON object; expected {pid, port, token, …}`);
  }
  const record = data as Record<string, unknown>;
  const want = (name: string, type: 'number' | 'string'): void => {
    if (typeof record[name] !== type) {
      throw new Error(`${key}.json: "${name}" is ${JSON.stringify(record[name])}; expected a ${type}`);
    }
  };
  want('pid', 'number');
  want('port', 'number');
  want('token', 'string');
  want('project', 'string');
  want('run', 'string');
  want('started_at', 'number');
  return {
    key,
    pid: record.pid as number,
    port: record.port as number,
    token: record.token as string,
    project: record.project as string,
    run: record.run as string,
    started_at: record.started_at as number,
  };
}

export interface ScanResult {
  live: SessionFile[];
  /** Unreadable files, each with what was wrong (half-written files are retried later). */
  problems: string[];
}

/** Read every discovery file of `dir` whose process is alive. A missing folder is empty. */
export function scanSessions(dir: string, alive: (pid: number) => boolean = isAlive): ScanResult {
  const result: ScanResult = { live: [], problems: [] };
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return result;
  }
  // Dot files are the writers' temporary files, renamed into place when complete.
  for (const name of names.filter((n) => n.endsWith('.json') && !n.startsWith('.')).sort()) {
    const key = name.slice(0, -'.json'.length);
    try {
      const session = parseSessionFile(key, readFileSync(join(dir, name), 'utf8'));
      if (alive(session.pid)) result.live.push(session);
    } catch (err) {
      result.problems.push(err instanceof Error ? err.message : String(err));
    }
  }
  return result;
}

export interface WatcherEvents {
  added(session: SessionFile): void;
  removed(key: string): void;
  problem(text: string): void;
}

/**
 * Reports sessions as they appear and disappear in the folder `dir()` (re-read on
 * `restart`, so a changed setting takes effect).
 */
export class SessionWatcher extends Disposable {
  private known = new Map<string, SessionFile>();
  private watcher: FSWatcher | null = null;
  private debounce: ReturnType<typeof setTimeout> | null = null;
  private readonly reported = new Set<string>();

  constructor(
    private readonly dir: () => string,
    private readonly events: WatcherEvents,
    rescanMs = 2000,
    private readonly alive: (pid: number) => boolean = isAlive,
  ) {
    super();
    const timer = setInterval(() => this.scan(), rescanMs);
    this.register(toDisposable(() => clearInterval(timer)));
    this.register(toDisposable(() => this.unwatch()));
    this.register(toDisposable(() => this.debounce && clearTimeout(this.debounce)));
    this.scan();
  }

  /** Forget the current folder's sessions and start over (the folder setting changed). */
  restart(): void {
    for (const key of this.known.keys()) this.events.removed(key);
    this.known.clear();
    this.unwatch();
    this.scan();
  }

  /** Scan now; also called by the watcher and the timer. */
  scan(): void {
    if (this.isDisposed) return;
    const dir = this.dir();
    this.ensureWatching(dir);
    const { live, problems } = scanSessions(dir, this.alive);
    for (const text of problems) {
      if (!this.reported.has(text)) this.events.problem(text);
      this.reported.add(text);
    }
    const seen = new Set<string>();
    for (const session of live) {
      seen.add(session.key);
      if (!this.known.has(session.key)) {
        this.known.set(session.key, session);
        this.events.added(session);
      }
    }
    for (const key of [...this.known.keys()]) {
      if (!seen.has(key)) {
        this.known.delete(key);
        this.events.removed(key);
      }
    }
  }

  private ensureWatching(dir: string): void {
    if (this.watcher || !existsSync(dir)) return;
    try {
      this.watcher = watch(dir, () => {
        if (this.debounce) clearTimeout(this.debounce);
        // Writers rename a finished temporary file into place: wait for the burst to end.
        this.debounce = setTimeout(() => this.scan(), 100);
      });
      this.watcher.on('error', () => this.unwatch());
    } catch {
      this.watcher = null; // the periodic rescan still finds sessions
    }
  }

  private unwatch(): void {
    this.watcher?.close();
    this.watcher = null;
  }
}
