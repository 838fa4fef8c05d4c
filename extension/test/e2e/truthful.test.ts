/**
 * What the dashboard says is what the run does, in real Chromium: Stop reads "stopping" then
 * "stopped"; the loss distribution refreshes while the run trains; the explorer's hint follows
 * the scan; and nothing of one run's samples ever shows under another (also when a slow
 * answer for the first run arrives after switching to the second). Screenshots in
 * test-results/truthful-*.png.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { WebSocket } from 'ws';
import { openBrowser, openTab, RESULTS_DIR, type Browser } from '../support/browser';
import { runInfo, startFakeSession, type FakeSession } from '../support/fakeSession';
import { EXTENSION_DIR, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
let first: Training;
let second: Training;
let browser: Browser;

before(async () => {
  [first, second] = await Promise.all([
    startWatched(home, '--project truth --name first --sleep 0.01'),
    startWatched(home, '--project truth --name second --sleep 0.01'),
  ]);
  browser = await openBrowser();
  await browser.page.goto(first.url);
  await browser.page.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length === 2, undefined, { timeout: 20_000 });
});

after(async () => {
  await browser?.close();
  await Promise.all([first?.kill(), second?.kill()]);
});

const entry = (name: string): string => `[data-testid=run]:has(.run-name:text-is("${name}"))`;
const caption = (): Promise<string> => browser.page.textContent('[data-testid=histogram-caption]').then((t) => t ?? '');

test('the loss distribution refreshes on its own while the run trains', async () => {
  const { page } = browser;
  await page.click(entry('first'));
  await openTab(page, 'samples');
  await page.waitForFunction(() => /training at step \d+/.test(document.querySelector('[data-testid=histogram-caption]')?.textContent ?? ''), undefined, { timeout: 20_000 });
  const step = Number(/at step (\d+)/.exec(await caption())?.[1]);
  await page.waitForFunction((s) => Number(/at step (\d+)/.exec(document.querySelector('[data-testid=histogram-caption]')?.textContent ?? '')?.[1] ?? 0) > s, step, { timeout: 15_000 });
});

test('samples and selections of one run never show under another', async () => {
  const { page } = browser;
  await page.click('[data-testid=pause]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'paused');
  await page.waitForSelector('[data-testid=data-map][data-points]:not([data-points=""])');
  await page.click('[data-region=hard]');
  await page.waitForFunction(() => (document.querySelector('[data-testid=selection]') as HTMLSelectElement | null)?.value === 'train-hard');
  await page.waitForSelector('[data-testid=sample-rows] tbody tr');
  assert.equal(await page.isEnabled('[data-testid=selection-fork]'), true);
  await page.click(entry('second'));
  await page.waitForFunction(() => document.querySelector('.run-title')?.textContent === 'truth / second');
  await page.waitForTimeout(1500); // long enough for any answer still on its way for the first run
  assert.equal(await page.locator('[data-testid=selection] option').count(), 0, 'no selection of the first run');
  assert.equal(await page.locator('[data-testid=sample-rows]').count(), 0, 'no rows of the first run');
  assert.equal(await page.isDisabled('[data-testid=selection-fork]'), true);
  assert.equal(await page.getAttribute('[data-testid=data-map]', 'data-picked'), '', 'no region of the first run picked here');
  await page.screenshot({ path: join(RESULTS_DIR, 'truthful-switched.png') });
  await page.click(entry('first'));
  await page.waitForFunction(() => (document.querySelector('[data-testid=selection]') as HTMLSelectElement | null)?.value === 'train-hard');
});

test('the explorer\'s hint follows the scan', async () => {
  const { page } = browser;
  assert.match((await page.textContent('.explorer .plot-caption')) ?? '', /^Scan train first/);
  await page.click('[data-testid=scan]');
  await page.waitForFunction(() => /is scanned: Project draws/.test(document.querySelector('.explorer .plot-caption')?.textContent ?? ''), undefined, { timeout: 30_000 });
  await page.selectOption('.explorer select', 'pca');
  await page.click('[data-testid=explorer-project]');
  await page.waitForFunction(() => /samples of train · pca of the scan at step \d+/.test(document.querySelector('.explorer .plot-caption')?.textContent ?? ''), undefined, { timeout: 30_000 });
});

test('Stop says stopping, then stopped', async () => {
  const { page } = browser;
  await page.click('[data-testid=resume]');
  await page.waitForFunction(() => document.querySelector('header [data-testid=pill]')?.textContent === 'running');
  await page.click('[data-testid=stop]');
  await page.click('[data-testid=stop]'); // a second click confirms
  await page.waitForFunction(() => /^stop: (stopping|stopped) at step \d+/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''));
  assert.doesNotMatch((await page.textContent('[data-testid=ack]')) ?? '', /running/);
  await page.waitForFunction(() => /^stop: stopped at step \d+$/.test(document.querySelector('[data-testid=ack]')?.textContent ?? ''), undefined, { timeout: 20_000 });
  await page.waitForFunction(() => /^(finished|disconnected)$/.test(document.querySelector('header [data-testid=pill]')?.textContent ?? ''));
  assert.deepEqual(browser.errors.filter((e) => !e.includes('WebSocket connection to')), []);
});

test('a slow answer for a run the page no longer shows is dropped', async () => {
  // Two scripted sessions: the first answers the per-sample queries 1.5 s late, with its own
  // 8192 samples; the second has none. The page switches to the second before they arrive.
  const quick: FakeSession = await startFakeSession({
    session: 'quick',
    token: 'quick-token',
    onSubscribe: (_c, socket: WebSocket) => socket.send(snapshot('quick', 'quick')),
    answer: (command, socket) => socket.send(JSON.stringify(command.type === 'selections' ? reply(command, { selections: [] }) : error(command))),
  });
  const late: FakeSession = await startFakeSession({
    session: 'slow',
    token: 'slow-token',
    httpRoot: join(EXTENSION_DIR, '..', 'onthefly', 'dashboard'),
    listed: (own) => [own, { ...own, pid: 2, port: quick.port, token: quick.token, run: 'quick', session: 'quick' }],
    onSubscribe: (_c, socket) => socket.send(snapshot('slow', 'slow')),
    answer: (command, socket) => setTimeout(() => socket.send(JSON.stringify(slowAnswer(command))), 1500),
  });
  const page = await browser.context.newPage();
  try {
    await page.goto(`http://127.0.0.1:${late.port}/?token=${late.token}`);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=run]').length === 2);
    await openTab(page, 'samples');
    await page.click(entry('slow'));
    await page.waitForFunction(() => document.querySelector('.run-title')?.textContent === 'p / slow');
    await page.click(entry('quick'));
    await page.waitForFunction(() => document.querySelector('.run-title')?.textContent === 'p / quick');
    await page.waitForTimeout(2500);
    assert.equal(await page.locator('[data-testid=selection] option').count(), 0);
    assert.equal(await page.getAttribute('[data-testid=histogram]', 'data-total'), '');
    assert.equal(await page.getAttribute('[data-testid=data-map]', 'data-total'), '');
  } finally {
    await page.close();
    await Promise.all([late.close(), quick.close()]);
  }
});

function snapshot(session: string, run: string): string {
  return JSON.stringify({ type: 'snapshot', v: 1, session, seq: 0, time: 1, logs: [], runs: [{ ...runInfo(run, 'paused'), series: {}, health: [], hparam_changes: [], epoch_starts: [] }] });
}

const reply = (command: Record<string, unknown>, data: Record<string, unknown>): Record<string, unknown> => ({ type: 'reply', id: command.id, data });
const error = (command: Record<string, unknown>): Record<string, unknown> => ({ type: 'error', id: command.id, error: { code: 'invalid_state', message: 'no per-sample data here' } });

/** The slow session's own per-sample data: 8192 samples, a selection of 1811 hard ones. */
function slowAnswer(command: Record<string, unknown>): Record<string, unknown> {
  const header = { split: 'train', source: 'training', step: 7 };
  switch (command.type) {
    case 'selections':
      return reply(command, { selections: [{ name: 'slow-hard', split: 'train', source: 'training', step: 7, criterion: 'region hard', size: 1811 }] });
    case 'selection_rows':
      return reply(command, { name: 'slow-hard', total: 1811, offset: 0, rows: [{ index: 8069, loss: 3, confidence: 0.1, variability: 0.1, correct: 0, margin: null, count: 3, label: 1 }] });
    case 'histogram':
      return reply(command, { ...header, edges: [0, 1, 2], counts: [8000, 192], total: 8192, below: 0, above: 0, missing: 0, min: 0, max: 2, mean: 0.5 });
    case 'data_map':
      return reply(command, { ...header, total: 8192, variability: [0.1], confidence: [0.5], correct: [1], index: [8069] });
    default:
      return error(command);
  }
}
