import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { HubLauncher, runningHub } from '../../src/host/hubLauncher';

function fakePython(dir: string, body: string): string {
  const path = join(dir, 'python');
  writeFileSync(path, `#!/bin/bash\necho "$ONTHEFLY_HOME $*" >> ${join(dir, 'args')}\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

test('a running hub of the home is reused; a stopped one (pid 0) is not', () => {
  const home = mkdtempSync(join(tmpdir(), 'otf-hub-'));
  assert.equal(runningHub(home), null);
  writeFileSync(join(home, 'hub.json'), JSON.stringify({ pid: process.pid, port: 1, token: 't', url: 'http://127.0.0.1:1/?token=t', started_at: 0 }));
  assert.equal(runningHub(home), 'http://127.0.0.1:1/?token=t');
  writeFileSync(join(home, 'hub.json'), JSON.stringify({ pid: 0, port: 1, token: 't', url: 'http://127.0.0.1:1/?token=t', started_at: 0 }));
  assert.equal(runningHub(home), null);
});

test('without a hub, `python -m onthefly dashboard` starts one, on any port when its own is taken', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'otf-hub-'));
  const python = fakePython(
    dir,
    'if [ "$4" != "--port" ]; then echo "onthefly: port 47620 on 127.0.0.1 is in use; expected a free port" >&2; exit 2; fi\n' +
      'echo "[onthefly] dashboard: http://127.0.0.1:5555/?token=hub"\nexec sleep 30',
  );
  const launcher = new HubLauncher({ python: () => python, home: () => dir });
  assert.equal(await launcher.address(), 'http://127.0.0.1:5555/?token=hub');
  assert.deepEqual(readFileSync(join(dir, 'args'), 'utf8').trim().split('\n'), [`${dir} -m onthefly dashboard`, `${dir} -m onthefly dashboard --port 0`]);
  launcher.dispose();
});
