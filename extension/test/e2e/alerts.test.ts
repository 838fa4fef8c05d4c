/**
 * Alerts in real Chromium against real trainings that go wrong on purpose
 * (`fixtures/watched_run.py`): a loss spike, a stalled step, then a NaN loss; and a second
 * run whose data loader raises. Each shows in the banner, in the run's state in the run list
 * and the header, as a marker on the loss chart, and in `onthefly status`; a stall clears
 * when steps come again; dismissing hides an alert. Screenshot: test-results/alerts.png.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, RESULTS_DIR, type Browser } from '../support/browser';
import { cli, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
let sick: Training;
let crashing: Training | undefined;
let browser: Browser;

before(async () => {
  sick = await startWatched(home, '--project alerts --name sick --sleep 0.01 --spike-at 120 --stall-at 260 --stall-seconds 4 --nan-at 420', {
    ONTHEFLY_STALL_SECONDS: '1',
  });
  browser = await openBrowser();
  await browser.page.goto(sick.url);
});

after(async () => {
  await browser?.close();
  await Promise.all([sick?.kill(), crashing?.kill()]);
});

const alert = (kind: string): string => `[data-testid=alerts] [data-testid=alert][data-kind=${kind}]`;

test('a loss spike, then a stalled step: each raised in the banner; the stall clears', async () => {
  const { page } = browser;
  await page.waitForSelector(alert('loss_spike'), { timeout: 30_000 });
  assert.match((await page.textContent(alert('loss_spike'))) ?? '', /loss spike.*training loss [\d.]+ at step 120 is [\d.]+x the median/i);
  await page.waitForSelector(alert('stalled'), { timeout: 30_000 });
  assert.match((await page.textContent(alert('stalled'))) ?? '', /no training step for \d+ s/);
  assert.match((await page.getAttribute('[data-testid=header-alerts]', 'title')) ?? '', /stalled/);
  await page.waitForSelector(alert('stalled'), { state: 'detached', timeout: 30_000 });
});

test('a NaN loss is an error alert: banner, run list, header, chart marker and the CLI', async () => {
  const { page } = browser;
  await page.waitForSelector(alert('nonfinite_loss'), { timeout: 30_000 });
  assert.match((await page.textContent(alert('nonfinite_loss'))) ?? '', /NaN loss.*the training loss is NaN at step 420 \(it was [\d.]+ at step 419\)/);
  assert.match((await page.getAttribute('[data-testid=run-alerts]', 'title')) ?? '', /nonfinite_loss/);
  assert.equal(await page.textContent('header [data-testid=pill]'), 'running', 'the run goes on: the alert says what is wrong');
  await page.waitForSelector('figure[data-metric=loss] [data-testid=marker][data-kind=error]', { state: 'attached' });
  await page.waitForSelector('figure[data-metric=loss] [data-testid=marker][data-kind=warning]', { state: 'attached' });
  await page.screenshot({ path: join(RESULTS_DIR, 'alerts.png') });
  const status = JSON.parse(await cli(home, 'status', 'alerts/sick', '--json')) as { alerts: string[] };
  assert.ok(status.alerts.includes('nonfinite_loss'), JSON.stringify(status.alerts));
  assert.match(await cli(home, 'status', 'alerts/sick'), /alerts: .*nonfinite_loss/);
  await page.click(`${alert('nonfinite_loss')} button:has-text("Dismiss")`);
  await page.waitForSelector(alert('nonfinite_loss'), { state: 'detached' });
  assert.match((await page.getAttribute('[data-testid=run-alerts]', 'title')) ?? '', /nonfinite_loss/, 'still in the run\'s state');
});

test('a data loader that raises ends its run with an alert the other run\'s page shows', async () => {
  const { page } = browser;
  crashing = await startWatched(home, '--project alerts --name crashing --sleep 0.01 --crash-after 25000');
  await page.waitForSelector('[data-testid=alert-other]:has-text("data loader crashed")', { timeout: 60_000 });
  await page.click('[data-testid=alert-other]:has-text("alerts/crashing")');
  await page.waitForSelector(alert('loader_crashed'));
  assert.match((await page.textContent(alert('loader_crashed'))) ?? '', /a data loader failed and ended the run: OSError: cannot read sample \d+: the file is corrupt/);
  await page.waitForFunction(() => /^(finished|disconnected)$/.test(document.querySelector('header [data-testid=pill]')?.textContent ?? ''), undefined, { timeout: 30_000 });
  assert.deepEqual(browser.errors.filter((e) => !e.includes('WebSocket connection to')), []);
});
