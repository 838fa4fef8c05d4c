/**
 * The dashboard in a real headless Chromium against real training processes: the page
 * served by one session server connects with the token from its address, fills its charts,
 * pauses, resumes and tests the run, then finds a second process started later (through
 * `GET /sessions`), connects to it directly and pauses it too.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, RESULTS_DIR, shownStep, waitForStepAbove, type Browser } from '../support/browser';
import { startTraining, tempHome, type Training } from '../support/processes';

const home = tempHome();
let training: Training;
let second: Training | undefined;
let browser: Browser;

before(async () => {
  training = await startTraining(home);
  browser = await openBrowser();
  await browser.page.goto(training.url);
});

after(async () => {
  await browser?.close();
  await second?.kill();
  await training?.kill();
});

test('the page connects, shows the run and fills a chart per metric', async () => {
  const { page } = browser;
  await waitForStepAbove(page, 20);
  await page.waitForSelector('[data-testid=chart] .chart-plot[data-points]');
  assert.ok((await page.locator('[data-testid=chart]').count()) >= 1);
  assert.equal(await page.locator('[data-testid=run]').count(), 1);
  assert.equal(await page.locator('header [data-testid=pill]').textContent(), 'running');
});

test('the newest streamed point is drawn', async () => {
  const { page } = browser;
  const step = await waitForStepAbove(page, 40);
  await page.waitForFunction(
    (s) => Number(document.querySelector('[data-metric=loss] .chart-plot')?.getAttribute('data-last') ?? -1) >= s,
    step,
  );
});

test('Pause stops the steps; Resume starts them again', async () => {
  const { page } = browser;
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => /pause: paused at step \d+/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  const paused = await shownStep(page);
  await page.waitForTimeout(1200);
  assert.equal(await shownStep(page), paused, 'no new step while paused');
  await page.click('[data-testid=resume]');
  await page.waitForFunction(() => /resume: running/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  await waitForStepAbove(page, paused, 5000);
  assert.equal(await page.locator('header [data-testid=pill]').textContent(), 'running');
});

test('a command the run refuses shows its error', async () => {
  const { page } = browser;
  // Resume is disabled while running; Extend sends a resume the running demo refuses.
  await page.click('[data-testid=extend]');
  await page.waitForFunction(() => /failed: .*\(invalid_state\)/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
});

test('Test adds a row to the test results', async () => {
  const { page } = browser;
  await page.click('[data-testid=test]');
  await page.waitForSelector('[data-testid=tests] tbody tr');
  assert.match((await page.locator('[data-testid=tests] tbody tr').first().textContent()) ?? '', /test_1/);
});

test('zooming fetches the full-resolution history of the visible range', async () => {
  const { page } = browser;
  await waitForStepAbove(page, 150);
  const over = page.locator('[data-metric=loss] .u-over');
  const box = await over.boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  const plot = page.locator('[data-metric=loss] .chart-plot');
  await page.waitForFunction(() => Number(document.querySelector('[data-metric=loss] .chart-plot')?.getAttribute('data-detail') || 0) > 0);
  const first = Number(await plot.getAttribute('data-first'));
  const last = Number(await plot.getAttribute('data-last'));
  const points = Number(await plot.getAttribute('data-points'));
  // Every step of the zoomed window is drawn (plus one neighbour each side).
  assert.ok(points >= last - first - 1, `${points} points for steps ${first}..${last}`);
  await page.dblclick('[data-metric=loss] .u-over');
  await page.waitForFunction(() => document.querySelector('[data-metric=loss] .chart-plot')?.getAttribute('data-detail') === '');
});

test('a second process shows up in the picker of the first one\'s page and can be paused', async () => {
  const { page } = browser;
  second = await startTraining(home);
  // The run's title ends with its session key, `<pid>-<port>`.
  const secondRun = page.locator(`[data-testid=run][title$="-${second.port})"]`);
  await secondRun.waitFor({ timeout: 15_000 });
  assert.equal(await page.locator('[data-testid=run]').count(), 2);
  await secondRun.click();
  await page.waitForSelector(`[data-testid=run][title$="-${second.port})"][aria-pressed=true]`);
  await waitForStepAbove(page, 10);
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'running');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => /pause: paused at step \d+/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  const paused = await shownStep(page);
  await page.waitForTimeout(1200);
  assert.equal(await shownStep(page), paused, 'no new step of the second run while paused');
  // The first run goes on: only the second process was paused.
  const firstRun = page.locator(`[data-testid=run][title$="-${training.port})"]`);
  assert.equal(await firstRun.locator('[data-testid=pill]').textContent(), 'running');

  // The second process ends: its run stays in the picker, no longer live.
  await second.kill();
  await page.waitForFunction(
    (port) => /^(disconnected|finished)$/.test(document.querySelector(`[data-testid=run][title$="-${port})"] [data-testid=pill]`)?.textContent ?? ''),
    second.port,
    { timeout: 15_000 },
  );
  assert.equal(await page.locator('[data-testid=run]').count(), 2);
  await firstRun.click();
});

test('no console error, page error or CSP violation; a screenshot is saved', async () => {
  await browser.page.screenshot({ path: join(RESULTS_DIR, 'browser-dashboard.png'), fullPage: true });
  // Chromium itself logs the refused reconnects to the second process after it ended.
  const refused = `WebSocket connection to 'ws://127.0.0.1:${second?.port}/`;
  assert.deepEqual(browser.errors.filter((e) => !e.includes(refused)), []);
});
