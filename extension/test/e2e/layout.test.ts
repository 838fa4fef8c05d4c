/**
 * The dashboard's layout in real Chromium against real trainings: the run's header and the
 * run list stay in view, the tab shown is remembered, charts keep one order whatever the run,
 * views say what to do when they are empty, the sample table's main columns fit without
 * scrolling, the data map's colours are colour-blind safe and its picked region stands out.
 * Screenshots: test-results/layout-*.png.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, type Browser } from '../support/browser';
import { startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
let points: Training;
let words: Training | undefined;
let browser: Browser;

before(async () => {
  points = await startWatched(home, '--project layout --name points --sleep 0.01');
  browser = await openBrowser();
  await browser.page.goto(points.url);
  await browser.page.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]');
});

after(async () => {
  await browser?.close();
  await Promise.all([points?.kill(), words?.kill()]);
});

const order = (): Promise<string[]> => browser.page.locator('figure[data-testid=chart]').evaluateAll((els) => els.map((e) => e.getAttribute('data-metric') ?? ''));

test('charts keep one order: loss, the run\'s own metrics, then learning rates and gradient norms', async () => {
  assert.deepEqual(await order(), ['loss', 'grad_norm', 'lr']);
});

test('the header and the run list stay in view however far the page scrolls', async () => {
  const { page } = browser;
  await openTab(page, 'samples');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.click('[data-region=hard]');
  await page.waitForSelector('[data-testid=sample-rows] tbody tr');
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  assert.ok(await page.evaluate(() => window.scrollY > 200), 'the samples tab is taller than the window');
  const header = await page.locator('.sticky-head').boundingBox();
  assert.ok(header && Math.abs(header.y) < 2, `the header is at the top: ${JSON.stringify(header)}`);
  assert.ok(await page.isVisible('[data-testid=resume]'));
  const run = await page.locator('[data-testid=run]').first().boundingBox();
  assert.ok(run && run.y >= 0 && run.y < 200, 'the run list is in view');
  await page.screenshot({ path: join(RESULTS_DIR, 'layout-scrolled.png') });
});

test('the sample table\'s main columns fit without scrolling; the picked region stands out in safe colours', async () => {
  const { page } = browser;
  const scroll = await page.locator('.sample-table .table-scroll').evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
  assert.ok(scroll.scroll <= scroll.client + 1, `no horizontal scroll: ${JSON.stringify(scroll)}`);
  const headers = await page.locator('[data-testid=sample-rows] thead th').allTextContents();
  for (const column of ['index', 'sample', 'label', 'loss', 'correct', 'confidence', 'count']) {
    assert.ok(headers.some((h) => h.startsWith(column)), `${column} column in ${headers}`);
  }
  assert.ok(Number(await page.getAttribute('[data-testid=data-map]', 'data-picked')) > 0, 'the picked region is highlighted');
  const gradient = await page.locator('.data-map .gradient').evaluate((el) => getComputedStyle(el).backgroundImage);
  assert.match(gradient, /rgb\(230, 159, 0\).*rgb\(86, 180, 233\)/, 'orange to blue (Okabe–Ito), not red to green');
  await page.locator('section.samples').screenshot({ path: join(RESULTS_DIR, 'layout-samples.png') });
});

test('the tab shown is remembered across a reload', async () => {
  const { page } = browser;
  await page.reload();
  await page.waitForSelector('[data-tab=samples]:not([hidden])');
  assert.equal(await page.getAttribute('[data-testid=tab-samples]', 'aria-selected'), 'true');
});

test('another run has the same chart order; an ended run\'s sample views say why they are empty', async () => {
  const { page } = browser;
  words = await startWatched(home, '--project layout --name words --text --sleep 0.01 --steps 500');
  const entry = page.locator('[data-testid=run]', { hasText: 'words' });
  await entry.waitFor({ timeout: 20_000 });
  // Opened only once it has ended: nothing of its per-sample data was fetched while it lived.
  await page.waitForFunction(() => /^(finished|disconnected)$/.test([...document.querySelectorAll('[data-testid=run]')].find((e) => e.textContent?.includes('words'))?.querySelector('[data-testid=pill]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  await entry.click();
  await page.waitForFunction(() => /^This run has ended: its per-sample data lived in its training process/.test(document.querySelector('[data-testid=histogram-caption]')?.textContent ?? ''));
  assert.match((await page.textContent('.data-map .plot-caption')) ?? '', /Scan evaluates a whole split/);
  await openTab(page, 'charts');
  await page.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]');
  assert.deepEqual(await order(), ['loss', 'grad_norm', 'lr']);
  assert.deepEqual(browser.errors.filter((e) => !e.includes('WebSocket connection to')), []);
});
