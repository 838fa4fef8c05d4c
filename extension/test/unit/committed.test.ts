/** Generated and built files that are committed must match a fresh generation/build. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const root = join(__dirname, '..', '..', '..');

function check(script: string): void {
  const result = spawnSync(process.execPath, [join(root, 'scripts', script), '--check'], { cwd: root, encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr || result.stdout);
}

test('src/protocol.gen.ts matches protocol.schema.json', () => check('gen-types.mjs'));

test('the committed dashboard bundle (onthefly/dashboard/) matches a fresh build', () => check('build.mjs'));
