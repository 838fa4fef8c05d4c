/**
 * The dashboard in a real headless Chromium against real training processes: the page
 * served by one session server connects with the token from its address, fills its charts,
 * pauses, resumes and tests the run, then finds a second process started later (through
 * `GET /sessions`), connects to it directly and pauses it too.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, shownStep, waitForStepAbove, type Browser } from '../support/browser';
import { startTraining, tempHome, viewSession, type Training } from '../support/processes';

const home = tempHome();
let training: Training;
let second: Training | undefined;
let viewer: Training | undefined;
let browser: Browser;

before(async () => {
  training = await startTraining(home);
  browser = await openBrowser();
  await browser.page.goto(training.url);
});

after(async () => {
  await browser?.close();
  await second?.kill();
  await viewer?.kill();
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
  await openTab(page, 'health');
  // The demo trains with AdamW, which has no momentum: the run answers `unsupported`.
  await page.fill('[data-hparam=momentum]', '0.9');
  await page.click('[data-testid=hparam-apply]');
  await page.waitForFunction(() => /set failed: .*momentum.*\(unsupported\)/.test(document.querySelector('[data-testid=hparam-ack]')?.textContent ?? ''));
  await page.fill('[data-hparam=momentum]', '');
});

test('setting the learning rate is acknowledged and marked on the charts', async () => {
  const { page } = browser;
  await page.fill('[data-hparam=lr]', '0.001');
  await page.click('[data-testid=hparam-apply]');
  await page.waitForFunction(() => /set: ok at step \d+/.test(document.querySelector('[data-testid=hparam-ack]')?.textContent ?? ''));
  await openTab(page, 'charts');
  await page.waitForSelector('[data-metric=loss] [data-testid=marker]', { state: 'attached' });
  const label = (await page.getAttribute('[data-metric=loss] [data-testid=marker]', 'title')) ?? '';
  assert.match(label, /lr: [\d.e-]+ -> 0\.001 \(group 0\)/);
  assert.match((await page.textContent('[data-testid=hparam-history]')) ?? '', /lr: .* -> 0\.001/);
  // The panel shows the value in force at once, before any step reports it.
  assert.match((await page.textContent('[data-testid=hparam-current]')) ?? '', /^now: lr 0\.001\b/);
  await openTab(page, 'health');
  await page.fill('[data-hparam=lr]', '');
});

test('a health check runs from its button and lists its findings', async () => {
  const { page } = browser;
  await page.click('[data-check=gradients]');
  const result = page.locator('[data-testid=health] .health-result[data-check=gradients]');
  await result.waitFor({ timeout: 20_000 });
  assert.ok((await result.locator('.finding').count()) >= 1);
  assert.match((await result.locator('.health-head').textContent()) ?? '', /gradients.*step \d+/);
  // Several clicks queue up and go out one at a time (the run would answer a second one `busy`).
  await page.click('[data-check=determinism]');
  await page.click('[data-check=activations]');
  await page.locator('[data-testid=health] .health-result[data-check=activations]').waitFor({ timeout: 30_000 });
  await page.locator('[data-testid=health] .health-result[data-check=determinism]').waitFor();
  assert.doesNotMatch((await page.textContent('[data-testid=health-status]')) ?? '', /busy/);
});

test('Test adds a row to the test results', async () => {
  const { page } = browser;
  await openTab(page, 'session');
  await page.click('[data-testid=test]');
  await page.waitForSelector('[data-testid=tests] tbody tr');
  assert.match((await page.locator('[data-testid=tests] tbody tr').first().textContent()) ?? '', /test_1/);
  // One column per metric: the loss once, whatever case or prefix the trainer gave it.
  const columns = (await page.locator('[data-testid=tests] thead th').allTextContents()).map((c) => c.toLowerCase());
  assert.equal(columns.filter((c) => c === 'loss').length, 1, columns.join(', '));
  assert.equal(new Set(columns).size, columns.length, columns.join(', '));
});

test('validation is drawn on the chart of its metric, next to training', async () => {
  const { page } = browser;
  await openTab(page, 'charts');
  // The first epoch ends at step 128; its validation joins the train loss chart.
  await page.waitForFunction(() => /\bval\b/.test(document.querySelector('[data-metric=loss] .chart-plot')?.getAttribute('data-splits') ?? ''), undefined, { timeout: 20_000 });
  assert.match((await page.textContent('[data-metric=loss] .legend')) ?? '', /train.*val/);
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
  const firstAck = (await page.textContent('[data-testid=ack]')) ?? '';
  assert.notEqual(firstAck, '', 'the first run has an acknowledgement line');
  await secondRun.click();
  await page.waitForSelector(`[data-testid=run][title$="-${second.port})"][aria-pressed=true]`);
  // The first run's acknowledgement belongs to it: the second run has none yet.
  assert.equal(await page.textContent('[data-testid=ack]'), '');
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
  // Back on the first run, its own last acknowledgement shows again.
  await page.waitForFunction((text) => document.querySelector('[data-testid=ack]')?.textContent === text, firstAck);
});

test('at a pause: export the session, list the checkpoint ring, restore, load; view the file', async () => {
  const { page } = browser;
  const file = join(mkdtempSync(join(tmpdir(), 'otf-e2e-export-')), 'demo.otf');
  await openTab(page, 'session');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.fill('[data-testid=session-path]', file);
  await page.click('[data-testid=session-export]');
  await page.waitForFunction(() => /^export: \/.*demo\.otf \(.*\) at step \d+$/.test(document.querySelector('[data-testid=session-ack]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  assert.ok(existsSync(file) && statSync(file).size > 0);
  // The same path again: refused as existing, and only "Replace" sends it with overwrite.
  const written = statSync(file).mtimeMs;
  await page.click('[data-testid=session-export]');
  await page.click('[data-testid=confirm-overwrite] [data-testid=confirm-keep]');
  assert.match(await page.textContent('[data-testid=session-ack]') ?? '', /exists; expected a new file name, or overwrite to replace it \(file_error\)$/);
  assert.equal(statSync(file).mtimeMs, written);
  await page.click('[data-testid=session-export]');
  await page.click('[data-testid=confirm-overwrite] [data-testid=confirm-replace]');
  await page.waitForFunction(() => /^export: \/.*demo\.otf \(.*\) at step \d+$/.test(document.querySelector('[data-testid=session-ack]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  assert.ok(statSync(file).mtimeMs > written);
  assert.equal(await page.locator('[data-testid=confirm-overwrite]').count(), 0);
  // The pause put a snapshot in the ring; the list shows it with an enabled Restore.
  const row = page.locator('[data-testid=checkpoints] tr[data-checkpoint]').last();
  await row.waitFor();
  assert.match((await row.textContent()) ?? '', /pause/);
  await row.locator('[data-testid=restore]').click();
  await page.waitForFunction(() => /^restore c\d+: paused/.test(document.querySelector('[data-testid=session-ack]')?.textContent ?? ''));
  await page.click('[data-testid=session-load]');
  await page.waitForFunction(() => /^load: paused/.test(document.querySelector('[data-testid=session-ack]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  await page.click('[data-testid=resume]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'running');

  // `onthefly view` serves the file read-only: the page finds it like any session.
  viewer = await viewSession(home, file);
  const viewed = page.locator(`[data-testid=run][title$="-${viewer.port})"]`);
  await viewed.waitFor({ timeout: 15_000 });
  await viewed.click();
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'finished');
  assert.ok(await page.isDisabled('[data-testid=session-export]'));
  await openTab(page, 'charts');
  await page.waitForSelector('[data-metric=loss] .chart-plot[data-points]');
  await page.screenshot({ path: join(RESULTS_DIR, 'browser-viewer.png'), fullPage: true });
  await page.locator(`[data-testid=run][title$="-${training.port})"]`).click();
});

test('no console error, page error or CSP violation; a screenshot is saved', async () => {
  await browser.page.screenshot({ path: join(RESULTS_DIR, 'browser-dashboard.png'), fullPage: true });
  // Chromium itself logs the refused reconnects to the second process after it ended.
  const refused = `WebSocket connection to 'ws://127.0.0.1:${second?.port}/`;
  assert.deepEqual(browser.errors.filter((e) => !e.includes(refused)), []);
});
