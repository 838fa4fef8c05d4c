// Builds the extension: the host bundle (dist/extension.js) and the dashboard page, written
// both into the extension (dist/webview/, the webview's only resource root) and into the
// Python package (onthefly/dashboard/, served by the session server to browsers).
//
//   node scripts/build.mjs            build everything
//   node scripts/build.mjs --tests    also compile test/**/*.test.ts into out/test/
//   node scripts/build.mjs --check    fail if onthefly/dashboard/ differs from a fresh build
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dashboardDir = join(root, '..', 'onthefly', 'dashboard');
const webviewDir = join(root, 'dist', 'webview');
const REBUILD = 'cd extension && npm run build';

/** ws loads these optional native modules when present; the extension stays pure JS. */
const noNativeModules = {
  name: 'no-native-modules',
  setup(build) {
    build.onResolve({ filter: /^(bufferutil|utf-8-validate)$/ }, (args) => ({ path: args.path, namespace: 'no-native' }));
    build.onLoad({ filter: /.*/, namespace: 'no-native' }, () => ({
      contents: 'throw new Error("native module disabled");',
    }));
  },
};

/** The dashboard page as {file name: contents}, built in memory. */
export async function buildDashboard() {
  const result = await esbuild.build({
    entryPoints: { app: join(root, 'src', 'webview', 'main.ts') },
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome114', 'firefox115', 'safari16'],
    minify: true,
    legalComments: 'eof',
    outdir: 'bundle',
    write: false,
    logLevel: 'warning',
  });
  const files = { 'index.html': readFileSync(join(root, 'src', 'webview', 'index.html'), 'utf8') };
  for (const file of result.outputFiles) files[relative('bundle', file.path)] = file.text;
  return files;
}

async function buildHost() {
  await esbuild.build({
    entryPoints: [join(root, 'src', 'extension.ts')],
    outfile: join(root, 'dist', 'extension.js'),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: ['vscode'],
    plugins: [noNativeModules],
    sourcemap: true,
    logLevel: 'warning',
  });
}

function listTests(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return listTests(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

async function buildTests() {
  rmSync(join(root, 'out'), { recursive: true, force: true });
  await esbuild.build({
    entryPoints: listTests(join(root, 'test')),
    outdir: join(root, 'out', 'test'),
    outbase: join(root, 'test'),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    alias: { vscode: join(root, 'test', 'stubs', 'vscode.ts') },
    sourcemap: 'inline',
    logLevel: 'warning',
  });
}

function writeAll(dir, files) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
}

/** Differences between the committed page and `files`, one line each. */
export function compareDashboard(files) {
  let committed = [];
  try {
    committed = readdirSync(dashboardDir);
  } catch {
    return [`${dashboardDir} is missing`];
  }
  const problems = [];
  for (const name of committed) if (!(name in files)) problems.push(`${name} is not built any more`);
  for (const [name, text] of Object.entries(files)) {
    if (!committed.includes(name)) problems.push(`${name} is missing`);
    else if (readFileSync(join(dashboardDir, name), 'utf8') !== text) problems.push(`${name} differs`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const page = await buildDashboard();
  if (args.includes('--check')) {
    const problems = compareDashboard(page);
    if (problems.length) {
      console.error(`onthefly/dashboard/ is stale (${problems.join('; ')}); run \`${REBUILD}\``);
      process.exit(1);
    }
    process.exit(0);
  }
  writeAll(dashboardDir, page);
  writeAll(webviewDir, page);
  await buildHost();
  if (args.includes('--tests')) await buildTests();
}
