/**
 * Comparing runs in real Chromium against real trainings: two runs of a project (different
 * learning rates) ticked in the run list share every chart, one colour each, with a legend
 * and a readout row per run; the runs table lists both with their last and best values and
 * their configuration, sorts and filters. Screenshots in test-results/compare-*.png; with
 * ONTHEFLY_UPDATE_IMAGES=1 the overlaid charts also become the README's picture
 * (docs/images/overlaid-runs.png, committed).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, type Browser } from '../support/browser';
import { EXTENSION_DIR, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
const IMAGES = join(EXTENSION_DIR, '..', 'docs', 'images');
let slow: Training;
let fast: Training;
let browser: Browser;

before(async () => {
  [slow, fast] = await Promise.all([
    startWatched(home, '--project sweep --name lr-0.02 --lr 0.02 --sleep 0.01'),
    startWatched(home, '--project sweep --name lr-0.2 --lr 0.2 --sleep 0.01'),
  ]);
  browser = await openBrowser();
  await browser.page.goto(slow.url);
  await browser.page.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length === 2, undefined, { timeout: 20_000 });
});

after(async () => {
  await browser?.close();
  await Promise.all([slow?.kill(), fast?.kill()]);
});

const row = (name: string): string => `.run-row:has([data-testid=run] .run-name:text-is("${name}"))`;

test('two runs ticked in the run list share every chart, one colour each', async () => {
  const { page } = browser;
  await page.click(`${row('lr-0.02')} [data-testid=run]`);
  await page.click(`${row('lr-0.02')} [data-testid=compare-run]`);
  await page.click(`${row('lr-0.2')} [data-testid=compare-run]`);
  const loss = 'figure[data-metric=loss]';
  await page.waitForSelector(`${loss} .chart-plot[data-runs="2"]`);
  assert.deepEqual(await page.locator(`${loss} .legend-entry`).allTextContents(), ['lr-0.02', 'lr-0.2']);
  const colors = await page.locator(`${loss} .legend-entry`).evaluateAll((els) => els.map((e) => getComputedStyle(e).color));
  assert.deepEqual(colors, ['rgb(86, 180, 233)', 'rgb(230, 159, 0)']);
  // Every chart of the two runs compares them (the learning rate too).
  for (const metric of ['lr', 'grad_norm']) await page.waitForSelector(`figure[data-metric=${metric}] .chart-plot[data-runs="2"]`);
  // Wait for a few hundred steps of both, so the picture says something.
  await page.waitForFunction(() => Number(document.querySelector('figure[data-metric=loss] .chart-plot')?.getAttribute('data-last') ?? 0) > 400, undefined, { timeout: 60_000 });
  const box = await page.locator(`${loss} .u-over`).boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.4);
  const readout = page.locator(`${loss} [data-testid=readout]`);
  await readout.waitFor();
  const rows = JSON.parse((await readout.getAttribute('data-values')) ?? '[]') as [string, number | null][];
  assert.deepEqual(rows.map(([label]) => label), ['lr-0.02', 'lr-0.2']);
  assert.ok(rows.every(([, value]) => typeof value === 'number'), JSON.stringify(rows));
  await page.screenshot({ path: join(RESULTS_DIR, 'compare-charts.png') });
  if (process.env.ONTHEFLY_UPDATE_IMAGES === '1') {
    mkdirSync(IMAGES, { recursive: true });
    copyFileSync(join(RESULTS_DIR, 'compare-charts.png'), join(IMAGES, 'overlaid-runs.png'));
  }
});

test('the runs table lists both with last and best values and their configuration; it sorts and filters', async () => {
  const { page } = browser;
  await openTab(page, 'runs');
  const table = page.locator('[data-testid=runs-table]');
  await table.waitFor();
  assert.equal(await table.locator('tbody tr').count(), 2);
  const head = await table.locator('thead').textContent();
  for (const column of ['run', 'state', 'step', 'loss', 'loss (min)', 'optimizer', 'lr', 'batch_size']) assert.ok(head?.includes(column), `${column} column`);
  await page.click('[data-testid=runs-table] button[data-sort="c:lr"]');
  await page.waitForSelector('[data-testid=runs-table] button[data-sort="c:lr"][aria-sort=descending]');
  assert.deepEqual(await table.locator('tbody [data-testid=runs-select]').allTextContents(), ['sweep/lr-0.2', 'sweep/lr-0.02']);
  await page.click('[data-testid=runs-table] button[data-sort="c:lr"]');
  await page.waitForSelector('[data-testid=runs-table] button[data-sort="c:lr"][aria-sort=ascending]');
  assert.deepEqual(await table.locator('tbody [data-testid=runs-select]').allTextContents(), ['sweep/lr-0.02', 'sweep/lr-0.2']);
  await page.fill('[data-testid=runs-filter]', 'lr=0.2');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=runs-table] tbody tr').length === 1);
  assert.match((await page.textContent('[data-testid=runs-count]')) ?? '', /^1 of 2 runs$/);
  await page.screenshot({ path: join(RESULTS_DIR, 'compare-table.png') });
  await page.fill('[data-testid=runs-filter]', '');
  // Un-ticking a run from the table takes it off the charts.
  await page.click('[data-testid=runs-table] tr:has-text("lr-0.2") [data-testid=compare-run]');
  await openTab(page, 'charts');
  await page.waitForSelector('figure[data-metric=loss] .chart-plot[data-runs="1"]');
  assert.deepEqual(browser.errors, []);
});
