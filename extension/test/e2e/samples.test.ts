/**
 * The per-sample panels in real Chromium against a real training (the demo CNN): pause,
 * scan the train split, see its loss histogram, drag a region into a selection, see the
 * table fill, export it as CSV (the file exists), pick a data-map region, drag a box on the
 * data map, project the explorer.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, waitForStepAbove, type Browser } from '../support/browser';
import { startTraining, tempHome, type Training } from '../support/processes';

let training: Training;
let browser: Browser;

before(async () => {
  training = await startTraining(tempHome());
  browser = await openBrowser();
  await browser.page.goto(training.url);
});

after(async () => {
  await browser?.close();
  await training?.kill();
});

const text = (selector: string): Promise<string> => browser.page.textContent(selector).then((t) => t ?? '');

test('pause, scan the train split, see its histogram', async () => {
  const { page } = browser;
  await waitForStepAbove(page, 20);
  await openTab(page, 'samples');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.selectOption('[data-testid=sample-split]', 'train');
  await page.click('[data-testid=scan]');
  await page.waitForFunction(() => /^scan train: \d+ samples at step \d+/.test(document.querySelector('[data-testid=scan-ack]')?.textContent ?? ''), undefined, { timeout: 60_000 });
  // The progress events come on the stream, the reply on its own: either may arrive first.
  await page.waitForFunction(() => /^scan of train done: \d+ samples/.test(document.querySelector('[data-testid=scan-text]')?.textContent ?? ''));
  const size = Number(/: (\d+) samples/.exec(await text('[data-testid=scan-ack]'))?.[1]);
  await page.waitForSelector(`[data-testid=histogram][data-total="${size}"]`);
  assert.match(await text('[data-testid=histogram-caption]'), /^train · scan at step \d+ · \d+ samples/);
  // The counts have their axis: round ticks from zero.
  const ticks = ((await page.getAttribute('[data-testid=histogram-y-axis]', 'data-ticks')) ?? '').split(' ').map(Number);
  assert.ok(ticks.length >= 2 && ticks[0] === 0 && ticks.every((t, i) => i === 0 || t > ticks[i - 1]), `y ticks ${ticks}`);
});

test('a region dragged across the histogram becomes a selection the table lists; it exports to CSV', async () => {
  const { page } = browser;
  const box = await page.locator('[data-testid=histogram]').boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width * 0.1, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2, { steps: 10 });
  await page.mouse.up();
  await page.waitForFunction(() => /^selected train-loss-/.test(document.querySelector('[data-testid=histogram-ack]')?.textContent ?? ''));
  const size = Number(/: (\d+) samples/.exec(await text('[data-testid=histogram-ack]'))?.[1]);
  assert.ok(size > 0, 'the region holds samples');
  await page.waitForSelector('[data-testid=sample-rows] tbody tr');
  assert.match(await text('[data-testid=rows-page]'), new RegExp(`^rows 1–${Math.min(50, size)} of ${size}$`));

  const folder = mkdtempSync(join(tmpdir(), 'otf-e2e-samples-'));
  await page.selectOption('[data-testid=export-format]', 'csv');
  await page.fill('[data-testid=export-dir]', folder);
  await page.click('[data-testid=export-selection]');
  await page.waitForFunction(() => /^export(:| failed)/.test(document.querySelector('[data-testid=export-ack]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  const ack = await text('[data-testid=export-ack]');
  const path = /^export: (\/\S+\.csv) \((\d+) rows/.exec(ack);
  assert.ok(path, ack);
  assert.equal(Number(path[2]), size);
  assert.ok(path[1].startsWith(folder) && existsSync(path[1]), `${path[1]} exists`);
  assert.match(readFileSync(path[1], 'utf8').split('\n')[0], /^"?index"?,"?loss"?,/);
});

test('the data map shows the training statistics; a region becomes a selection', async () => {
  const { page } = browser;
  await page.waitForSelector('[data-testid=data-map][data-points]:not([data-points=""])');
  await page.click('[data-region=hard]');
  await page.waitForFunction(() => /^selected train-hard: \d+ samples/.test(document.querySelector('[data-testid=data-map-ack]')?.textContent ?? ''));
  await page.waitForFunction(() => (document.querySelector('[data-testid=selection]') as HTMLSelectElement | null)?.value === 'train-hard');
});

test('a box dragged on the data map selects the samples inside it; likely mislabeled too', async () => {
  const { page } = browser;
  const canvas = await page.locator('[data-testid=data-map]').boundingBox();
  assert.ok(canvas);
  // From the top left of the plot to its middle: high confidence, low variability.
  await page.mouse.move(canvas.x + 36, canvas.y + 6);
  await page.mouse.down();
  await page.mouse.move(canvas.x + canvas.width / 2, canvas.y + canvas.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction(() => /^selected train-box-[\d.e_-]+: \d+ samples/.test(document.querySelector('[data-testid=data-map-ack]')?.textContent ?? ''));
  await page.waitForFunction(() => (document.querySelector('[data-testid=selection]') as HTMLSelectElement | null)?.value.startsWith('train-box-'));
  await page.click('[data-region=mislabeled]');
  await page.waitForFunction(() => /^selected train-mislabeled: \d+ samples/.test(document.querySelector('[data-testid=data-map-ack]')?.textContent ?? ''));
});

test('the explorer projects the scanned split', async () => {
  const { page } = browser;
  await page.selectOption('.explorer select', 'pca');
  await page.click('[data-testid=explorer-project]');
  await page.waitForSelector('[data-testid=explorer][data-points]:not([data-points=""])', { timeout: 30_000 });
  await page.locator('section.samples').screenshot({ path: join(RESULTS_DIR, 'samples-demo.png') });
  assert.deepEqual(browser.errors, []);
});
