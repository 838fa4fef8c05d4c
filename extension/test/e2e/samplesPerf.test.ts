/**
 * The per-sample panels in real Chromium against a scripted session holding 1,000,000
 * samples: the histogram (binned by the session) and the data map (subsampled by it) draw
 * without freezing the page, and dragging a region across the histogram stays fluid and
 * turns into a selection the table lists. Figures go to test-results/perf.json.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { WebSocket } from 'ws';
import { openBrowser, openTab, RESULTS_DIR, type Browser } from '../support/browser';
import { fakeSamples } from '../support/fakeSamples';
import { refuse, runInfo, startFakeSession, type FakeSession } from '../support/fakeSession';
import { instrument, max, readPerf, record, round, target } from '../support/perf';
import { EXTENSION_DIR } from '../support/processes';

const DASHBOARD = join(EXTENSION_DIR, '..', 'onthefly', 'dashboard');
const N = 1_000_000;

let fake: FakeSession | null = null;
let browser: Browser | null = null;
after(async () => {
  await browser?.close();
  await fake?.close();
});

function answerWith(samples: ReturnType<typeof fakeSamples>, served: Map<string, number>) {
  return (command: Record<string, unknown>, socket: WebSocket): void => {
    const answer = samples.answer(command);
    if (answer === undefined) return refuse(command, socket); // what the scripted samples do not model
    const frame = 'data' in answer ? { type: 'reply', id: command.id, data: answer.data } : { type: 'error', id: command.id, error: answer };
    const text = JSON.stringify(frame);
    served.set(String(command.type), text.length);
    socket.send(text);
  };
}

test('a 1,000,000-sample histogram and data map draw, and a dragged region becomes a selection, without freezing', async (t) => {
  const samples = fakeSamples(N);
  const served = new Map<string, number>();
  fake = await startFakeSession({
    httpRoot: DASHBOARD,
    onSubscribe: (_c, socket) =>
      socket.send(
        JSON.stringify({ type: 'snapshot', v: 1, session: 's1', seq: 0, time: 1, logs: [], runs: [{ ...runInfo('big', 'paused'), step: 100, series: {}, health: [], hparam_changes: [], epoch_starts: [0] }] }),
      ),
    answer: answerWith(samples, served),
  });
  browser = await openBrowser();
  const { page } = browser;
  await instrument(page);
  const started = Date.now();
  await page.goto(`http://127.0.0.1:${fake.port}/?token=${fake.token}`);
  await openTab(page, 'samples');
  await page.waitForSelector(`[data-testid=histogram][data-total="${N}"]`, { timeout: 30_000 });
  const histogramShownMs = Date.now() - started;
  await page.waitForSelector(`[data-testid=data-map][data-total="${N}"]`, { timeout: 30_000 });
  const dataMapShownMs = Date.now() - started;
  const bins = Number(await page.getAttribute('[data-testid=histogram]', 'data-bins'));
  assert.ok(bins >= 50, `${bins} bins`);
  assert.match((await page.textContent('[data-testid=histogram-caption]')) ?? '', /1000000 samples/);
  const loaded = await readPerf(page);

  // Drag across the right half of the bars: the region follows the pointer, then the run
  // makes it a selection and the table lists its hardest samples.
  const box = await page.locator('[data-testid=histogram]').boundingBox();
  assert.ok(box);
  const y = box.y + box.height / 2;
  const longBefore = (await readPerf(page)).longTasks.length;
  await page.mouse.move(box.x + box.width * 0.2, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.95, y, { steps: 40 });
  assert.match((await page.textContent('[data-testid=histogram-readout]')) ?? '', /\d+ samples/);
  const released = Date.now();
  await page.mouse.up();
  await page.waitForSelector('[data-testid=sample-rows] tbody tr');
  const selectToRowsMs = Date.now() - released;
  assert.match((await page.textContent('[data-testid=histogram-ack]')) ?? '', /^selected train-loss-[\d.]+-[\d.]+: \d+ samples/);
  assert.match((await page.textContent('[data-testid=rows-page]')) ?? '', /^rows 1–50 of \d+$/);
  const perf = await readPerf(page);
  const moves = perf.moves.slice().sort((a, b) => a - b);
  const figures = {
    samples: N,
    histogramBins: bins,
    histogramReplyBytes: served.get('histogram') ?? 0,
    dataMapPoints: Number(await page.getAttribute('[data-testid=data-map]', 'data-points')),
    dataMapReplyBytes: served.get('data_map') ?? 0,
    pageLoadToHistogramMs: histogramShownMs,
    pageLoadToDataMapMs: dataMapShownMs,
    histogramDrawMaxMs: round(max(perf.measures['onthefly:histogram-draw'])),
    scatterDrawMaxMs: round(max(perf.measures['onthefly:scatter-draw'])),
    loadLongTaskMaxMs: round(max(loaded.longTasks)),
    dragMoves: moves.length,
    dragMoveToFrameMedianMs: round(moves[Math.floor(moves.length / 2)] ?? 0),
    dragMoveToFrameMaxMs: round(max(moves)),
    dragLongTaskMaxMs: round(max(perf.longTasks.slice(longBefore))),
    releaseToTableRowsMs: selectToRowsMs,
  };
  record(t, 'samples_million', figures);
  target(t, figures.histogramDrawMaxMs < 50, `histogram draw ${figures.histogramDrawMaxMs} ms`);
  target(t, figures.scatterDrawMaxMs < 100, `data map draw ${figures.scatterDrawMaxMs} ms`);
  target(t, figures.dragMoveToFrameMaxMs < 50, `pointer move to frame ${figures.dragMoveToFrameMaxMs} ms`);

  // Sorting by another column asks the run for the page in that order.
  await page.click('[data-testid=sample-rows] button[data-sort=index]');
  await page.waitForFunction(() => document.querySelector('[data-testid=sample-rows] button[data-sort=index]')?.getAttribute('aria-sort') === 'descending');
  const sortCommand = fake.commands.filter((c) => c.type === 'selection_rows').at(-1);
  assert.equal(sortCommand?.sort, 'index');
  await page.click('[data-testid=rows-next]');
  await page.waitForFunction(() => /^rows 51–100 of/.test(document.querySelector('[data-testid=rows-page]')?.textContent ?? ''));
  await page.locator('section.samples').screenshot({ path: join(RESULTS_DIR, 'samples-million.png') });
  assert.deepEqual(browser.errors, []);
});
