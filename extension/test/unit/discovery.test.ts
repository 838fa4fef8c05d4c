import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { isAlive, scanSessions, sessionsDir, SessionWatcher } from '../../src/host/discovery';
import { until } from '../support/fakeSession';

function sessionFile(dir: string, pid: number, port: number, extra: Record<string, unknown> = {}): void {
  const body = { pid, port, token: 't', project: 'p', run: 'r', started_at: 1, session: 's', url: 'u', ...extra };
  writeFileSync(join(dir, `${pid}-${port}.json`), JSON.stringify(body));
}

/** The pid of a process that has exited (the OS does not reuse it this fast). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((r) => child.on('exit', r));
  return child.pid as number;
}

test('the folder comes from the setting, then ONTHEFLY_HOME, then ~/.onthefly', () => {
  assert.equal(sessionsDir('/a', { ONTHEFLY_HOME: '/b' }), join('/a', 'sessions'));
  assert.equal(sessionsDir('  ', { ONTHEFLY_HOME: '/b' }), join('/b', 'sessions'));
  assert.match(sessionsDir(undefined, {}), /\.onthefly[/\\]sessions$/);
});

test('live sessions are found; dead pids, temporary and broken files are not', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'otf-disc-'));
  const dead = await deadPid();
  assert.equal(isAlive(dead), false);
  sessionFile(dir, process.pid, 1234);
  sessionFile(dir, dead, 1235);
  writeFileSync(join(dir, '.tmp-abc.json'), '{');
  writeFileSync(join(dir, '99-1.json'), JSON.stringify({ pid: 'x' }));
  const { live, problems } = scanSessions(dir);
  assert.deepEqual(live.map((s) => s.key), [`${process.pid}-1234`]);
  assert.equal(live[0].token, 't');
  assert.equal(problems.length, 1);
  assert.match(problems[0], /99-1\.json: "pid" is "x"; expected a number/);
  assert.deepEqual(scanSessions(join(dir, 'missing')).live, []);
  rmSync(dir, { recursive: true });
});

test('the watcher reports sessions as files appear and disappear, even in a folder created later', async () => {
  const home = mkdtempSync(join(tmpdir(), 'otf-watch-'));
  const dir = join(home, 'sessions');
  const added: string[] = [];
  const removed: string[] = [];
  const watcher = new SessionWatcher(() => dir, {
    added: (s) => void added.push(s.key),
    removed: (k) => void removed.push(k),
    problem: () => undefined,
  }, 50);
  try {
    mkdirSync(dir);
    sessionFile(dir, process.pid, 4000);
    await until(() => added.length === 1, 5000, 'added');
    assert.deepEqual(added, [`${process.pid}-4000`]);
    rmSync(join(dir, `${process.pid}-4000.json`));
    await until(() => removed.length === 1, 5000, 'removed');
    assert.deepEqual(removed, [`${process.pid}-4000`]);
  } finally {
    watcher.dispose();
    rmSync(home, { recursive: true });
  }
});
