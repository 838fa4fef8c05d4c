/**
 * Reading charts in real Chromium, against a scripted session (exact, known numbers): the
 * hover readout (every series at the cursor with its step, epoch and wall time), axis titles,
 * NaN values and alerts marked where they are, a log scale per chart that the page remembers,
 * and a PNG export that carries its legend. Screenshots: test-results/charts-*.png.
 */
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, RESULTS_DIR, type Browser } from '../support/browser';
import { refuse, runInfo, startFakeSession, type FakeSession } from '../support/fakeSession';
import { EXTENSION_DIR } from '../support/processes';

const DASHBOARD = join(EXTENSION_DIR, '..', 'onthefly', 'dashboard');
const N = 3000;
const NAN_STEPS = [1500, 2200];
const START = 1_767_000_000;

/** A loss from 2.3 down to about 0.002 (flat on a linear axis after step 1500), NaN at two steps. */
function snapshot(): string {
  const steps = Array.from({ length: N }, (_, i) => i);
  const loss = steps.map((i) => (NAN_STEPS.includes(i) ? null : 2.3 * Math.exp(-i / 430) + 0.0015));
  const val = steps.filter((i) => i % 500 === 499);
  const alert = {
    v: 1, session: 's1', run: 'r', seq: 1, time: START + 150, type: 'alert', kind: 'nonfinite_loss', state: 'raised',
    severity: 'error', step: 1500, message: 'the training loss is NaN at step 1500 (it was 0.0046 at step 1499): look at the learning rate', details: {},
  };
  const run = {
    ...runInfo('r'),
    step: N - 1,
    started_at: START,
    alerts: ['nonfinite_loss'],
    series: {
      loss: { steps, values: loss, decimated: false },
      'val/loss': { steps: val, values: val.map((i) => 2.5 * Math.exp(-i / 500) + 0.05), decimated: false },
    },
    epoch_starts: [0, 500, 1000, 1500, 2000, 2500],
    health: [],
    hparam_changes: [],
    lineage: null,
    alert_history: [alert],
    clock: { steps: [0, 1000, 2000, 3000], times: [START, START + 100, START + 200, START + 300] },
  };
  return JSON.stringify({ type: 'snapshot', v: 1, session: 's1', seq: 1, time: START + 300, logs: [], runs: [run] });
}

let fake: FakeSession;
let browser: Browser;
let url: string;

before(async () => {
  fake = await startFakeSession({ httpRoot: DASHBOARD, onSubscribe: (_c, socket) => socket.send(snapshot()), answer: refuse });
  browser = await openBrowser();
  url = `http://127.0.0.1:${fake.port}/?token=${fake.token}`;
  await browser.page.goto(url);
  await browser.page.waitForSelector(`[data-metric=loss] .chart-plot[data-last="${N - 1}"]`);
});

after(async () => {
  await browser?.close();
  await fake?.close();
});

const plot = '[data-metric=loss] .chart-plot';

test('hovering shows every series at the cursor with its step, epoch and wall time', async () => {
  const { page } = browser;
  const box = await page.locator('[data-metric=loss] .u-over').boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  const readout = page.locator('[data-metric=loss] [data-testid=readout]');
  await readout.waitFor(); // the middle of the chart is the alert's marker: hovering it reads on
  const step = Number(await readout.getAttribute('data-step'));
  assert.ok(Math.abs(step - N / 2) < N / 20, `step ${step} under the middle of the chart`);
  const head = (await readout.locator('.readout-head').textContent()) ?? '';
  assert.match(head, new RegExp(`^step ${step} · epoch ${Math.floor(step / 500)} · \\d\\d:\\d\\d:\\d\\d \\(\\+\\d+(\\.\\d)?[ms]`));
  const values = JSON.parse((await readout.getAttribute('data-values')) ?? '[]') as [string, number | null][];
  assert.deepEqual(values.map(([label]) => label), ['train', 'val']);
  const train = values[0][1];
  const expected = NAN_STEPS.includes(step) ? null : 2.3 * Math.exp(-step / 430) + 0.0015;
  assert.ok(train === null ? expected === null : Math.abs(train - (expected ?? 0)) < 1e-3, `train ${train}, expected ${expected}`);
  await page.locator('figure[data-metric=loss]').screenshot({ path: join(RESULTS_DIR, 'charts-readout.png') });
});

test('axes have titles; NaN values and alerts are marked where they are', async () => {
  const { page } = browser;
  assert.equal(await page.getAttribute(plot, 'data-x-title'), 'step');
  assert.equal(await page.getAttribute(plot, 'data-y-title'), 'loss');
  const marks = page.locator('[data-metric=loss] [data-testid=nonfinite]');
  assert.equal(await marks.count(), NAN_STEPS.length);
  assert.deepEqual(await marks.evaluateAll((els) => els.map((e) => e.getAttribute('title'))), NAN_STEPS.map((s) => `train: NaN or infinite at step ${s}`));
  const alert = page.locator('[data-metric=loss] [data-testid=marker][data-kind=error]');
  assert.match((await alert.getAttribute('title')) ?? '', /^step 1500\nthe training loss is NaN/);
});

test('a log scale per chart, remembered across a reload', async () => {
  const { page } = browser;
  await page.click('[data-metric=loss] [data-testid=log-scale]');
  await page.waitForSelector(`${plot}[data-log=true]`);
  assert.equal(await page.getAttribute(plot, 'data-y-title'), 'loss (log scale)');
  await page.mouse.move(0, 0);
  await page.locator('figure[data-metric=loss]').screenshot({ path: join(RESULTS_DIR, 'charts-log.png') });
  await page.reload();
  await page.waitForSelector(`${plot}[data-last="${N - 1}"]`);
  assert.equal(await page.getAttribute(plot, 'data-log'), 'true');
  assert.equal(await page.isChecked('[data-metric=loss] [data-testid=log-scale]'), true);
});

test('an exported PNG carries the title, the legend in the series colours, and the markers', async () => {
  const { page } = browser;
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-metric=loss] button:has-text("PNG")')]);
  const path = join(RESULTS_DIR, 'charts-export.png');
  copyFileSync((await download.path()) ?? '', path);
  assert.equal(download.suggestedFilename(), 'loss.png');
  const png = readFileSync(path).toString('base64');
  // Decode it in the page and look for the legend's colours above the plot.
  const found = await page.evaluate(async (data) => {
    const image = new Image();
    image.src = `data:image/png;base64,${data}`;
    await image.decode();
    const canvas = document.createElement('canvas');
    [canvas.width, canvas.height] = [image.width, image.height];
    const ctx = canvas.getContext('2d') as CanvasRenderingContext2D;
    ctx.drawImage(image, 0, 0);
    const head = ctx.getImageData(0, 0, image.width, Math.round(50 * devicePixelRatio)).data;
    const has = (r: number, g: number, b: number): boolean => {
      for (let i = 0; i < head.length; i += 4) if (Math.abs(head[i] - r) + Math.abs(head[i + 1] - g) + Math.abs(head[i + 2] - b) < 30) return true;
      return false;
    };
    return { train: has(0x56, 0xb4, 0xe9), val: has(0xe6, 0x9f, 0x00), width: image.width, height: image.height };
  }, png);
  assert.ok(found.train && found.val, `legend colours in the image head: ${JSON.stringify(found)}`);
  assert.deepEqual(browser.errors, []);
});
