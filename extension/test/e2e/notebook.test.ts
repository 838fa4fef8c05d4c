/**
 * `onthefly.show()` in a notebook, in real Chromium: a cell's output (the frame it returns,
 * `fixtures/notebook_cell.py`) embedded in a page of another loopback origin, as Jupyter
 * serves it, shows the hub — started in the kernel — with a run that starts afterwards.
 * Screenshot: test-results/notebook.png.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, RESULTS_DIR, type Browser } from '../support/browser';
import { PYTHON, startTraining, startWatched, tempHome, type Training } from '../support/processes';

const home = tempHome();
const output = join(mkdtempSync(join(tmpdir(), 'otf-e2e-notebook-')), 'cell.html');
let kernel: Training;
let run: Training | undefined;
let notebook: Server;
let browser: Browser;

before(async () => {
  kernel = await startTraining(home, { ONTHEFLY_HUB_PORT: '0' }, `${PYTHON} test/e2e/fixtures/notebook_cell.py ${output}`);
  notebook = createServer((_request, response) => {
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><html><body><h1>notebook.ipynb</h1><div class="output">${readFileSync(output, 'utf8')}</div></body></html>`);
  });
  await new Promise<void>((resolve) => notebook.listen(0, '127.0.0.1', () => resolve()));
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  notebook?.close();
  await Promise.all([run?.kill(), kernel?.kill()]);
});

test('the cell\'s frame shows the hub of the machine, with the runs started after it', async () => {
  const { page } = browser;
  const address = notebook.address();
  assert.ok(address && typeof address === 'object');
  await page.goto(`http://127.0.0.1:${address.port}/`);
  const frameElement = await page.waitForSelector('iframe[title="OnTheFly dashboard"]');
  const frame = await frameElement.contentFrame();
  assert.ok(frame, 'the dashboard may be framed by a notebook page');
  assert.ok(frame.url().startsWith(kernel.url.split('?')[0]));
  await frame.waitForSelector('[data-testid=tab-charts]');
  run = await startWatched(home, '--project notebook --name cell --sleep 0.01');
  await frame.waitForSelector('[data-testid=run]:has-text("cell")', { timeout: 20_000 });
  await frame.waitForSelector('figure[data-metric=loss] .chart-plot[data-points]:not([data-points="0"])', { timeout: 20_000 });
  assert.match(readFileSync(output, 'utf8'), /Open the OnTheFly dashboard in a new tab/);
  await page.screenshot({ path: join(RESULTS_DIR, 'notebook.png') });
  assert.deepEqual(browser.errors, []);
});
