/** Headless Chromium (Debian's), with the flags that keep it off the network. */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Frame, type Page } from 'playwright-core';
import { EXTENSION_DIR } from './processes';

export const RESULTS_DIR = join(EXTENSION_DIR, 'test-results');
const CHROMIUM = process.env.ONTHEFLY_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors, page errors and CSP violations seen so far. */
  errors: string[];
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'otf-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ARGS,
    viewport: { width: 1400, height: 1000 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** The step shown in the page's header. */
export async function shownStep(page: Page): Promise<number> {
  return Number((await page.getAttribute('[data-testid=step]', 'data-step')) ?? -1);
}

export async function waitForStepAbove(page: Page, step: number, timeout = 15_000): Promise<number> {
  await page.waitForFunction(
    (s) => Number(document.querySelector('[data-testid=step]')?.getAttribute('data-step') ?? -1) > s,
    step,
    { timeout },
  );
  return shownStep(page);
}

/** Show a section of the dashboard (`charts`, `runs`, `samples`, `forks`, `health`, `session`, `logs`). */
export async function openTab(page: Page | Frame, name: string): Promise<void> {
  await page.click(`[data-testid=tab-${name}]`);
  await page.waitForSelector(`[data-tab=${name}]:not([hidden])`);
}
