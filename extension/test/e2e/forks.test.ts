/**
 * Forks and merges in real Chromium against a real training (a small MLP with a hard
 * minority slice, `fixtures/fork_run.py`): pause, drag a loss range into a selection, fork
 * on it from the histogram (progress bar, Cancel), fork again from the selection table, see
 * the child run under its parent, open the dialog from a data-map region, compare (with the baselines), merge (greedy) with its before/after report, read
 * the lineage graph (fit, zoom, click a node), discard the merge and resume.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, openTab, RESULTS_DIR, shownStep, waitForStepAbove, type Browser } from '../support/browser';
import { startTraining, tempHome, type Training } from '../support/processes';

const FORK_RUN = '../.venv/bin/python test/e2e/fixtures/fork_run.py';

let training: Training;
let browser: Browser;

before(async () => {
  training = await startTraining(tempHome(), {}, FORK_RUN);
  browser = await openBrowser();
  await browser.page.goto(training.url);
});

after(async () => {
  await browser?.close();
  await training?.kill();
  // The run's own output (fork failures are logged there), for when a test here failed.
  if (training) writeFileSync(join(RESULTS_DIR, 'forks-training.log'), training.output());
});

const text = (selector: string): Promise<string> => browser.page.textContent(selector).then((t) => t ?? '');
const waitText = async (selector: string, pattern: RegExp, timeout = 30_000): Promise<void> => {
  try {
    await browser.page.waitForFunction(
      ([s, source]) => new RegExp(source).test(document.querySelector(s)?.textContent ?? ''),
      [selector, pattern.source] as const,
      { timeout },
    );
  } catch (error) {
    // What the page said instead, and the fork line: the first things to read on a failure.
    const said = `${selector} reads ${JSON.stringify(await text(selector))}; fork ack: ${JSON.stringify(await text('[data-testid=fork-ack]'))}`;
    throw new Error(`${selector} did not match ${String(pattern)} within ${timeout} ms: ${said}`, { cause: error });
  }
};

test('pause and drag a loss range of the training statistics into a selection', async () => {
  const { page } = browser;
  await waitForStepAbove(page, 30, 60_000);
  await openTab(page, 'samples');
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.waitForSelector('[data-testid=histogram][data-total]:not([data-total=""])');
  assert.equal(await page.isDisabled('[data-testid=histogram-fork]'), true, 'nothing selected yet');
  const box = await page.locator('[data-testid=histogram]').boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2, { steps: 8 });
  await page.mouse.up();
  await waitText('[data-testid=histogram-ack]', /^selected train-loss-\S+: \d+ samples/);
  assert.ok(Number(/: (\d+) samples/.exec(await text('[data-testid=histogram-ack]'))?.[1]) > 0);
});

test('a fork from the histogram shows its progress; Cancel stops it', async () => {
  const { page } = browser;
  await page.click('[data-testid=histogram-fork]');
  await page.waitForSelector('[data-testid=fork-dialog][open]');
  await page.fill('[data-testid=fork-budget]', '0');
  await page.click('[data-testid=fork-submit]');
  assert.match(await text('[data-testid=fork-error]'), /budget in steps "0" is not a whole number >= 1/);
  await page.fill('[data-testid=fork-name]', 'long');
  await page.fill('[data-testid=fork-budget]', '1000000');
  await page.click('[data-testid=fork-submit]');
  assert.equal(await page.isVisible('[data-testid=fork-dialog]'), false, 'the dialog closes');
  await page.waitForSelector('[data-testid=fork-progress]:not([hidden])');
  await waitText('[data-testid=fork-text]', /^fork long: \d+ \/ 1000000 steps/);
  await page.locator('section.forks').screenshot({ path: join(RESULTS_DIR, 'forks-progress.png') });
  await page.click('[data-testid=fork-cancel]');
  await waitText('[data-testid=fork-text]', /^fork long cancelled after \d+ steps/);
  await waitText('[data-testid=fork-ack]', /^fork long: cancelled, \d+ steps/);
  assert.equal(await page.isHidden('[data-testid=fork-progress]'), true);
});

test('a fork from the named selection trains its budget and appears under its parent', async () => {
  const { page } = browser;
  await openTab(page, 'samples');
  await page.waitForFunction(() => (document.querySelector('[data-testid=selection]') as HTMLSelectElement | null)?.value.startsWith('train-loss-'));
  await page.click('[data-testid=selection-fork]');
  await page.waitForSelector('[data-testid=fork-dialog][open]');
  await page.fill('[data-testid=fork-name]', 'hard');
  await page.fill('[data-testid=fork-budget]', '300');
  await page.fill('[data-testid=fork-lr]', '0.003');
  await page.screenshot({ path: join(RESULTS_DIR, 'forks-dialog.png') });
  await page.click('[data-testid=fork-submit]');
  await waitText('[data-testid=fork-ack]', /^fork hard: done, 300 steps in [\d.]+ s · slice loss [\d.e-]+ → [\d.e-]+$/);
  await waitText('[data-testid=fork-text]', /^fork hard done: 300 steps/);
  const child = page.locator('[data-testid=run][data-depth="1"]', { hasText: 'hard' });
  await child.waitFor();
  assert.match((await child.textContent()) ?? '', /fork of mlp @ \d+/);
  assert.equal(await page.locator('[data-testid=run][data-depth="0"]').count(), 1, 'forks are not top-level runs');
  await page.locator('.run-picker').screenshot({ path: join(RESULTS_DIR, 'forks-runs.png') });
});

test('a data-map region opens the fork dialog on its selection', async () => {
  const { page } = browser;
  await openTab(page, 'samples');
  await page.waitForSelector('[data-testid=data-map][data-points]:not([data-points=""])');
  await page.click('[data-region=hard]');
  await waitText('[data-testid=data-map-ack]', /^selected train-hard: \d+ samples/);
  await page.click('[data-testid=data-map-fork]');
  await page.waitForSelector('[data-testid=fork-dialog][open]');
  assert.match(await text('[data-testid=fork-dialog]'), /on the selection train-hard \(\d+ samples\)/);
  await page.click('[data-testid=fork-dialog] button.secondary');
  assert.equal(await page.isVisible('[data-testid=fork-dialog]'), false);
});

test('compare shows the parent, the fork and its equal-compute baselines on the slice, the rest and validation', async () => {
  const { page } = browser;
  await page.click('[data-testid=compare]');
  await page.waitForSelector('[data-testid=compare-table] tr[data-model=hard]', { timeout: 60_000 });
  const models = await page.locator('[data-testid=compare-table] tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-model')));
  assert.deepEqual(models.slice(0, 2), ['mlp', 'hard']);
  assert.match(String(models[2]), /^continue-\d+$/);
  assert.equal(models[3], 'oversample-hard');
  const head = await text('[data-testid=compare-table] thead');
  for (const target of ['hard', 'rest', 'val']) assert.ok(head.includes(target), `${target} column`);
  assert.match(await text('[data-testid=compare-caption]'), /^4 models at step \d+/);
});

// A greedy soup is never worse than the paused model on validation, so it is always applied.
test('a greedy merge reports before and after; the lineage shows main, forks and the merge', async () => {
  const { page } = browser;
  await page.click('[data-testid=merge-open]');
  await page.waitForSelector('[data-testid=merge-dialog][open]');
  assert.deepEqual(await page.locator('[data-testid=merge-forks] input').evaluateAll((boxes) => boxes.map((b) => (b as HTMLInputElement).value)), ['hard'], 'only finished forks');
  await page.selectOption('[data-testid=merge-method]', 'greedy');
  await page.click('[data-testid=merge-submit]');
  await waitText('[data-testid=merge-ack]', /^merged merge-1/);
  const rows = page.locator('[data-testid=merge-report] tbody tr');
  assert.deepEqual(await rows.evaluateAll((r) => r.map((row) => row.getAttribute('data-target'))), ['hard', 'rest', 'val']);
  for (const cell of await page.locator('[data-testid=merge-report] td[data-before], [data-testid=merge-report] td[data-after]').allTextContents()) {
    assert.match(cell, /^[\d.e-]+$/, 'a loss before and after on every target');
  }
  assert.match(await text('[data-testid=merge-caption]'), /^merge-1: greedy of hard at step \d+ · optimizer keep/);

  await page.waitForSelector('[data-testid=lineage-node][data-kind=merge][data-status=active]');
  const nodes = await page.locator('[data-testid=lineage-node]').evaluateAll((els) => els.map((e) => `${e.getAttribute('data-kind')}:${e.getAttribute('data-status')}`));
  assert.deepEqual(nodes.sort(), ['fork:cancelled', 'fork:done', 'main:superseded', 'merge:active']);
  assert.equal(await page.locator('.lineage-edge.edge-merge').count(), 2, 'parent and fork join the merge');
  // Fitted: every node lies inside the graph's visible area.
  const inside = await page.evaluate(() => {
    const graph = document.querySelector('[data-testid=lineage]') as SVGSVGElement;
    const area = graph.getBoundingClientRect();
    return [...graph.querySelectorAll('[data-testid=lineage-node]')].every((n) => {
      const b = n.getBoundingClientRect();
      return b.left >= area.left - 1 && b.right <= area.right + 1 && b.top >= area.top - 1 && b.bottom <= area.bottom + 1;
    });
  });
  assert.ok(inside, 'the graph is fitted into view');
  await page.locator('section.forks').screenshot({ path: join(RESULTS_DIR, 'forks-merged.png') });
});

test('the lineage graph zooms, fits again, and a click shows the node’s run', async () => {
  const { page } = browser;
  const graph = page.locator('[data-testid=lineage]');
  const fitted = await graph.getAttribute('viewBox');
  const box = await graph.boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -300);
  await page.waitForFunction((v) => document.querySelector('[data-testid=lineage]')?.getAttribute('viewBox') !== v, fitted);
  await page.click('[data-testid=lineage-fit]');
  assert.equal(await graph.getAttribute('viewBox'), fitted);

  await page.click('[data-testid=lineage-node][data-kind=fork][data-status=done]');
  await page.waitForFunction(() => document.querySelector('[data-testid=run][aria-pressed=true] .run-name')?.textContent === 'hard');
  assert.match(await text('.run-title'), /\/ hard$/);
  await page.waitForSelector('[data-testid=lineage-node][data-kind=fork][data-status=done].selected');
  await page.click('[data-testid=lineage-node][data-kind=main]');
  await page.waitForFunction(() => document.querySelector('[data-testid=run][aria-pressed=true] .run-name')?.textContent === 'mlp');
});

test('Discard undoes the merge while paused; Resume trains on', async () => {
  const { page } = browser;
  await page.click('[data-testid=merge-discard]');
  await waitText('[data-testid=merge-ack]', /^discarded merge-1: back to mlp at step \d+/);
  await page.waitForSelector('[data-testid=lineage-node][data-kind=merge][data-status=discarded]');
  await page.waitForSelector('[data-testid=lineage-node][data-kind=main][data-status=active]');
  assert.equal(await page.isDisabled('[data-testid=merge-discard]'), true);
  const step = await shownStep(page);
  await page.click('[data-testid=resume]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'running');
  await waitForStepAbove(page, step + 5);
  assert.deepEqual(browser.errors, []);
});
