/**
 * Seeing the samples in real Chromium against real trainings: the demo CNN's images as
 * thumbnails in the sample table and in the data map's hover, and a text run's sentences
 * decoded by its `describe_sample` hook. Previews are fetched only for the rows shown or the
 * point hovered. Screenshots: test-results/previews-*.png.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, waitForStepAbove, type Browser } from '../support/browser';
import { E2E_CMD, startTraining, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
let images: Training;
let words: Training;
let browser: Browser;

before(async () => {
  [images, words] = await Promise.all([
    startTraining(home, {}, `${E2E_CMD} --samples 2048`),
    startWatched(home, '--project previews --name words --text --sleep 0.01'),
  ]);
  browser = await openBrowser();
  await browser.page.goto(images.url);
});

after(async () => {
  await browser?.close();
  await Promise.all([images?.kill(), words?.kill()]);
});

const WORDS = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'dog', 'ran', 'far', 'home', 'sun', 'rain'];

test('image samples show as thumbnails in the table, fetched for the rows shown', async () => {
  const { page } = browser;
  await page.locator('[data-testid=run]', { hasText: 'cnn' }).click();
  await waitForStepAbove(page, 80, 60_000);
  await openTab(page, 'samples');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.waitForSelector('[data-testid=data-map][data-points]:not([data-points=""])');
  await page.click('[data-region=hard]');
  await page.waitForSelector('[data-testid=sample-rows] tbody tr [data-testid=preview-image]');
  const rows = await page.locator('[data-testid=sample-rows] tbody tr').count();
  const thumbnails = page.locator('[data-testid=sample-rows] [data-testid=preview-image]');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=sample-rows] [data-testid=preview-image]').length === n, rows);
  // 1 x 28 x 28 inputs: 28 x 28 thumbnails, drawn bigger without smoothing.
  assert.deepEqual(await thumbnails.first().evaluate((c) => [(c as HTMLCanvasElement).width, (c as HTMLCanvasElement).height]), [28, 28]);
  await page.locator('.sample-table').screenshot({ path: join(RESULTS_DIR, 'previews-table.png') });
});

test('hovering a data-map point shows its numbers and the sample', async () => {
  const { page } = browser;
  const canvas = page.locator('[data-testid=data-map]');
  const box = await canvas.boundingBox();
  assert.ok(box);
  // A drawn point: the first pixel in the plot that is neither background nor grey text.
  const point = await canvas.evaluate((c) => {
    const canvas = c as HTMLCanvasElement;
    const { data, width, height } = canvas.getContext('2d')?.getImageData(0, 0, canvas.width, canvas.height) ?? { data: [], width: 0, height: 0 };
    for (let y = Math.floor(height * 0.1); y < height * 0.9; y++) {
      for (let x = Math.floor(width * 0.1); x < width; x++) {
        const i = 4 * (y * width + x);
        const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
        if (Math.max(r, g, b) - Math.min(r, g, b) > 60) return { x: x / devicePixelRatio, y: y / devicePixelRatio };
      }
    }
    return null;
  });
  assert.ok(point, 'the data map has points');
  await page.mouse.move(box.x + point.x + 1, box.y + point.y + 1);
  const tip = page.locator('.data-map [data-testid=scatter-tip]');
  await tip.waitFor();
  assert.match((await tip.textContent()) ?? '', /^#\d+ · confidence [\d.]+ · variability [\d.]+ · correct [\d.]+/);
  await tip.locator('[data-testid=preview-image]').waitFor();
  await page.locator('.data-map').screenshot({ path: join(RESULTS_DIR, 'previews-data-map.png') });
});

test('a text run\'s samples show the sentences its describe_sample hook decodes', async () => {
  const { page } = browser;
  await page.locator('[data-testid=run]', { hasText: 'words' }).click();
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.waitForSelector('[data-testid=histogram][data-total]:not([data-total=""])');
  const box = await page.locator('[data-testid=histogram]').boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + 2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2, { steps: 8 });
  await page.mouse.up();
  await page.waitForSelector('[data-testid=sample-rows] tbody tr [data-testid=preview-text]');
  const texts = await page.locator('[data-testid=sample-rows] [data-testid=preview-text]').allTextContents();
  assert.ok(texts.length > 0);
  for (const text of texts) assert.ok(text.split(' ').length === 6 && text.split(' ').every((w) => WORDS.includes(w)), text);
  await page.locator('.sample-table').screenshot({ path: join(RESULTS_DIR, 'previews-text.png') });
  assert.deepEqual(browser.errors, []);
});
