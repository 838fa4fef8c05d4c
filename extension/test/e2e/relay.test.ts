/**
 * The VS Code path without VS Code: the extension host's real modules (discovery, run
 * store, dashboard panel) relay two real training processes to the real page in Chromium,
 * which gets a stand-in `acquireVsCodeApi` bridged to this process. Both runs show in the
 * picker; the second is paused through the relay; a run whose process ended stays listed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { ViewToHost } from '../../src/common/messages';
import { DashboardPanel } from '../../src/host/dashboardPanel';
import { sessionsDir, SessionWatcher } from '../../src/host/discovery';
import { RunStore } from '../../src/host/runStore';
import * as vscode from '../stubs/vscode';
import { openBrowser, RESULTS_DIR, shownStep, waitForStepAbove, type Browser } from '../support/browser';
import { until } from '../support/fakeSession';
import { startTraining, tempHome, type Training } from '../support/processes';
import { FakeWebviewPanel } from '../support/webviewPanel';

let first: Training;
let second: Training;
let browser: Browser;
let store: RunStore;
let watcher: SessionWatcher;
let panel: FakeWebviewPanel;

before(async () => {
  const home = tempHome();
  [first, second] = await Promise.all([startTraining(home), startTraining(home)]);
  store = new RunStore();
  watcher = new SessionWatcher(() => sessionsDir(home), {
    added: (s) => store.addSession(s),
    removed: (k) => store.endSession(k),
    problem: (t) => console.error(t),
  }, 300);
  browser = await openBrowser();
  panel = new FakeWebviewPanel(browser.page);
  await browser.page.exposeBinding('otfToHost', (_source, message: ViewToHost) => panel.fromPage(message));
  await browser.page.addInitScript(() => {
    const w = window as unknown as { otfToHost(m: unknown): void; acquireVsCodeApi(): unknown };
    w.acquireVsCodeApi = () => ({
      postMessage: (m: unknown) => w.otfToHost(m),
      getState: () => JSON.parse(sessionStorage.getItem('vscode-state') ?? 'null'),
      setState: (s: unknown) => sessionStorage.setItem('vscode-state', JSON.stringify(s)),
    });
  });
  DashboardPanel.revive(panel as never, vscode.Uri.file('/ext') as never, store);
  // The page itself comes from a session server; in VS Code the same files load from dist/webview.
  await browser.page.goto(first.url.replace(/\?.*/, ''));
});

after(async () => {
  await browser?.close();
  panel?.dispose();
  watcher?.dispose();
  store?.dispose();
  await Promise.all([first?.kill(), second?.kill()]);
});

test('both processes are discovered and both runs show in the picker', async () => {
  const { page } = browser;
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length === 2);
  await waitForStepAbove(page, 10);
  await page.waitForSelector('[data-testid=chart] .chart-plot[data-points]');
});

test('the second run is paused through the relay while the first keeps training', async () => {
  const { page } = browser;
  const rows = page.locator('[data-testid=run]');
  const target = (await rows.nth(1).getAttribute('title')) ?? '';
  await rows.nth(1).click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=run]')[1]?.getAttribute('aria-pressed') === 'true');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => /pause: paused at step \d+/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  const key = /\(([^)]+)\)$/.exec(target)?.[1] ?? '';
  const pausedRun = Object.values(store.state.sources[key].runs)[0];
  await until(() => pausedRun.info.state === 'paused', 5000, 'paused in the host state');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  const paused = await shownStep(page);
  const other = Object.values(store.state.sources).find((s) => s.key !== key);
  const otherRun = other && Object.values(other.runs)[0];
  assert.ok(otherRun);
  const otherStep = otherRun.info.step;
  await page.waitForTimeout(1200);
  assert.equal(await shownStep(page), paused, 'the paused run makes no step');
  assert.ok(otherRun.info.step > otherStep, 'the other run keeps training');
  await page.click('[data-testid=resume]');
  await waitForStepAbove(page, paused, 5000);
});

test('a run whose process ended stays in the picker, no longer live', async () => {
  const { page } = browser;
  await second.kill();
  // Interrupted, the training ends its run (`finished`) before its process exits; a process
  // killed outright leaves it `disconnected`. Either way it stays listed and viewable.
  await page.waitForFunction(
    (port) => /^(disconnected|finished)$/.test(document.querySelector(`[data-testid=run][title$="-${port})"] [data-testid=pill]`)?.textContent ?? ''),
    second.port,
  );
  assert.equal(await page.locator('[data-testid=run]').count(), 2);
});

test('a reloaded page gets the whole state again on ready', async () => {
  const { page } = browser;
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length === 2);
  await page.waitForSelector('[data-testid=chart] .chart-plot[data-points]');
  await page.screenshot({ path: join(RESULTS_DIR, 'relay-dashboard.png'), fullPage: true });
  assert.deepEqual(browser.errors, []);
});
