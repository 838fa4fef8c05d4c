/**
 * The hub (`onthefly dashboard`) in real Chromium against real trainings: one address lists
 * every live run as it appears and the exported sessions of its folder, the page holds only
 * the hub's token (never a run's), a run that ends stays viewable, a run that restarts is
 * followed; a tab opened from a run's own address that loses its run says so, points to the
 * hub and stops knocking. Screenshots: test-results/hub-*.png.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { openBrowser, RESULTS_DIR, type Browser } from '../support/browser';
import { cli, startHub, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
const folder = mkdtempSync(join(tmpdir(), 'otf-e2e-hub-runs-'));
const RUN = '--project hubtest --name mlp --sleep 0.01';
let first: Training;
let restarted: Training | undefined;
let hub: Training;
let browser: Browser;
const sockets: string[] = [];
const listings: unknown[] = [];

before(async () => {
  first = await startWatched(home, RUN);
  await cli(home, 'export', 'hubtest/mlp', join(folder, 'exported.otf'));
  hub = await startHub(home, `--logdir ${folder}`);
  browser = await openBrowser();
  const { page } = browser;
  page.on('websocket', (socket) => sockets.push(socket.url()));
  page.on('response', async (response) => {
    if (new URL(response.url()).pathname === '/sessions' && response.ok()) listings.push(await response.json());
  });
  await page.goto(hub.url);
});

after(async () => {
  await browser?.close();
  await Promise.all([first?.kill(), restarted?.kill(), hub?.kill()]);
});

const entry = (page: Page, port: number): ReturnType<Page['locator']> => page.locator(`[data-testid=run][title$="-${port})"]`);
const pillOf = (page: Page, port: number): Promise<string | null> => entry(page, port).locator('[data-testid=pill]').textContent();

test('the hub lists the live run and the exported file, holding only its own token', async () => {
  const { page } = browser;
  await entry(page, first.port).waitFor({ timeout: 20_000 });
  await page.waitForSelector('[data-testid=run][title*="exported.otf"]', { timeout: 20_000 });
  await entry(page, first.port).click();
  await page.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]:not([data-points="0"])');
  const hubPort = new URL(hub.url).port;
  const hubToken = new URL(hub.url).searchParams.get('token');
  const runToken = new URL(first.url).searchParams.get('token');
  assert.ok(sockets.length >= 2, `${sockets.length} sockets`);
  for (const url of sockets) {
    const parsed = new URL(url);
    assert.equal(parsed.port, hubPort, `${url} goes to the hub`);
    assert.match(parsed.pathname, /^\/ws\//);
    assert.equal(parsed.searchParams.get('token'), hubToken);
  }
  const listed = JSON.stringify(listings);
  assert.ok(listings.length > 0 && runToken && !listed.includes(runToken), 'no run token in the hub\'s list');
  assert.doesNotMatch(listed, /"token"/);
  await page.screenshot({ path: join(RESULTS_DIR, 'hub-live.png') });
});

test('a run whose process ended stays viewable; its restart is followed', async () => {
  const { page } = browser;
  const before = Number(await page.getAttribute('figure[data-metric=loss] .chart-plot', 'data-points'));
  await first.kill();
  await page.waitForFunction((port) => document.querySelector(`[data-testid=run][title$="-${port})"] [data-testid=pill]`)?.textContent === 'finished', first.port, { timeout: 20_000 });
  assert.ok(Number(await page.getAttribute('figure[data-metric=loss] .chart-plot', 'data-points')) >= before, 'its charts stay');
  restarted = await startWatched(home, RUN);
  // The page was showing the run that ended: it moves to its restart on its own.
  await page.waitForSelector(`[data-testid=run][title$="-${restarted.port})"][aria-pressed=true]`, { timeout: 20_000 });
  assert.equal(await pillOf(page, first.port), 'finished', 'the ended run is still listed');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'running');
  await page.screenshot({ path: join(RESULTS_DIR, 'hub-restarted.png') });
});

test('an exported session of the folder opens read-only', async () => {
  const { page } = browser;
  await page.click('[data-testid=run][title*="exported.otf"]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'finished');
  await page.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]:not([data-points="0"])');
  assert.ok(await page.isDisabled('[data-testid=pause]'));
  assert.deepEqual(browser.errors, []);
});

test('a tab of a run\'s own address that loses its run says so, points to the hub, and stops knocking', async () => {
  const own = await browser.context.newPage();
  const errors: string[] = [];
  own.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  assert.ok(restarted);
  await own.goto(restarted.url);
  await own.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]');
  await restarted.kill();
  await own.waitForSelector('[data-testid=notice]', { timeout: 20_000 });
  assert.match((await own.textContent('[data-testid=notice]')) ?? '', /has ended .*its charts stay in this tab.*onthefly dashboard/);
  const settled = errors.length;
  await own.waitForTimeout(8000);
  assert.ok(errors.length - settled <= 2, `${errors.length - settled} more console errors in 8 s: ${errors.slice(settled).join(' | ')}`);
  assert.ok(Number(await own.getAttribute('figure[data-metric=loss] .chart-plot', 'data-points')) > 0, 'the charts stay');
  await own.screenshot({ path: join(RESULTS_DIR, 'hub-run-page-lost.png') });
  await own.close();
});
