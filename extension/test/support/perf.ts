/** Performance instrumentation of the page for the browser suite, and where figures are kept. */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Page } from 'playwright-core';
import { RESULTS_DIR } from './browser';

const PERF_FILE = join(RESULTS_DIR, 'perf.json');

/** Add `figures` under `name` to test-results/perf.json and to the test output. */
export function record(t: TestContext, name: string, figures: Record<string, number>): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  let all: Record<string, unknown> = {};
  try {
    all = JSON.parse(readFileSync(PERF_FILE, 'utf8')) as Record<string, unknown>;
  } catch {
    // first figures of this run
  }
  all[name] = { ...figures, measuredAt: new Date().toISOString() };
  writeFileSync(PERF_FILE, JSON.stringify(all, null, 2) + '\n');
  t.diagnostic(`${name}: ${JSON.stringify(figures)}`);
}

/**
 * A performance target. `make bench` enforces it (ONTHEFLY_PERF_TARGETS=1); the regular suite
 * only reports a miss, because a timing on a shared machine says nothing about correctness.
 */
export function target(t: TestContext, ok: boolean, message: string): void {
  if (process.env.ONTHEFLY_PERF_TARGETS === '1') assert.ok(ok, message);
  else if (!ok) t.diagnostic(`target missed (enforced by make bench only): ${message}`);
}

/** In-page observers of draw times, input latency and long tasks (test instrumentation only). */
export async function instrument(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const perf = {
      draws: [] as number[],
      measures: {} as Record<string, number[]>,
      events: [] as number[],
      inputs: [] as number[],
      moves: [] as number[],
      longTasks: [] as number[],
    };
    (window as unknown as { otfPerf: typeof perf }).otfPerf = perf;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if (e.name === 'onthefly:chart-draw') perf.draws.push(e.duration);
        (perf.measures[e.name] ??= []).push(e.duration);
      }
    }).observe({ type: 'measure', buffered: true });
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) perf.events.push(e.duration);
    }).observe({ type: 'event', buffered: true, durationThreshold: 16 } as PerformanceObserverInit);
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) perf.longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
    // Input to the next frame, for inputs Event Timing leaves out (pointermove) or that are
    // faster than its 16 ms threshold.
    const untilFrame = (into: number[]) => (e: Event) => {
      const t0 = e.timeStamp;
      requestAnimationFrame(() => setTimeout(() => into.push(performance.now() - t0), 0));
    };
    addEventListener('keydown', untilFrame(perf.inputs), true);
    addEventListener('pointermove', untilFrame(perf.moves), true);
  });
}

export interface PagePerf {
  draws: number[];
  measures: Record<string, number[]>;
  events: number[];
  inputs: number[];
  moves: number[];
  longTasks: number[];
}

export const readPerf = (page: Page): Promise<PagePerf> =>
  page.evaluate(() => (window as unknown as { otfPerf: PagePerf }).otfPerf);

export const max = (values: number[] | undefined): number => (values?.length ? Math.max(...values) : 0);
export const round = (value: number): number => Math.round(value * 10) / 10;
