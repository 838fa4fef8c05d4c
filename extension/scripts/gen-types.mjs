// Generates src/protocol.gen.ts from protocol.schema.json (itself generated from
// onthefly/protocol.py by `python -m onthefly.schema`). `--check` fails when the committed
// file differs, naming the command that regenerates it.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compile } from 'json-schema-to-typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const schemaPath = join(root, 'protocol.schema.json');
const outPath = join(root, 'src', 'protocol.gen.ts');
export const REGENERATE = 'cd extension && npm run gen-types';

const HEADER = `/* eslint-disable */
/**
 * Wire types of the OnTheFly protocol — generated, do not edit.
 *
 * Source: extension/protocol.schema.json (from onthefly/protocol.py).
 * Regenerate: \`${REGENERATE}\`.
 */
`;

export async function render() {
  const schema = JSON.parse(readFileSync(schemaPath, 'utf8'));
  const body = await compile(schema, 'OnTheFlyProtocol', {
    bannerComment: '',
    unreachableDefinitions: true,
    additionalProperties: false,
    strictIndexSignatures: true,
    format: true,
    style: { singleQuote: true, printWidth: 100 },
  });
  return HEADER + '\n' + body;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = await render();
  if (process.argv.includes('--check')) {
    if (readFileSync(outPath, 'utf8') !== text) {
      console.error(`src/protocol.gen.ts is stale; run \`${REGENERATE}\``);
      process.exit(1);
    }
  } else {
    writeFileSync(outPath, text);
    console.error(`wrote ${outPath}`);
  }
}
