import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isAlive } from '../../src/host/discovery';
import { SessionViewer } from '../../src/host/sessionViewer';
import { until } from '../support/fakeSession';

/** A stand-in for Python: records its arguments and home, prints an address, waits. */
function fakePython(dir: string, body: string): string {
  const path = join(dir, 'python');
  writeFileSync(path, `#!/bin/bash\necho "$ONTHEFLY_HOME $*" > ${join(dir, 'args')}\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

test('a session file is served by `python -m onthefly view`, stopped on dispose', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'otf-viewer-'));
  const python = fakePython(dir, 'echo "[onthefly] dashboard: http://127.0.0.1:4321/?token=abc"\nexec sleep 30');
  const viewer = new SessionViewer({ python: () => python, home: () => '/tmp/otf-home' });
  const viewing = await viewer.open('/data/run.otf');
  assert.equal(viewing.port, 4321);
  assert.equal(viewing.url, 'http://127.0.0.1:4321/?token=abc');
  assert.equal(readFileSync(join(dir, 'args'), 'utf8').trim(), '/tmp/otf-home -m onthefly view /data/run.otf --port 0');
  assert.ok(isAlive(viewing.pid));
  viewer.dispose();
  await until(() => !isAlive(viewing.pid), 5000, 'the viewer process ends');
});

test('a viewer that fails says what it ran and what it printed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'otf-viewer-'));
  const python = fakePython(dir, 'echo "SessionFileError: not a session file" >&2\nexit 2');
  const viewer = new SessionViewer({ python: () => python, home: () => dir });
  await assert.rejects(viewer.open('/data/bad.otf'), /-m onthefly view \/data\/bad\.otf --port 0` exited with 2:\nSessionFileError: not a session file/);
  const missing = new SessionViewer({ python: () => join(dir, 'nope'), home: () => dir });
  await assert.rejects(missing.open('/data/x.otf'), /could not start .*onthefly\.python/);
  viewer.dispose();
  missing.dispose();
});

test('opening a file again replaces its earlier viewer', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'otf-viewer-'));
  const python = fakePython(dir, 'echo "[onthefly] dashboard: http://127.0.0.1:4321/?token=abc"\nexec sleep 30');
  const viewer = new SessionViewer({ python: () => python, home: () => dir });
  const first = await viewer.open('/data/run.otf');
  const second = await viewer.open('/data/run.otf');
  await until(() => !isAlive(first.pid), 5000, 'the earlier viewer ends');
  assert.ok(isAlive(second.pid));
  viewer.dispose();
  await until(() => !isAlive(second.pid), 5000, 'the viewer ends');
});
