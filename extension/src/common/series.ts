/**
 * Metric series as the dashboard keeps them: parallel step/value arrays in step order,
 * bounded by re-decimating when they grow past twice the point budget (the full
 * resolution stays on the server and comes back through `history` when zooming in).
 */
import type { Series } from '../protocol.gen';
import { decimate, lowerBound } from './decimate';

export type Split = 'train' | 'val' | 'test';

export interface SeriesData {
  steps: number[];
  values: (number | null)[];
  /** Some points between the kept ones were dropped (by the server or by bounding). */
  decimated: boolean;
  /** Bumped on every change, so views redraw only what moved. */
  rev: number;
}

/**
 * The key of a series, as the session server names it in snapshots and in `latest`: a
 * train metric keeps its name (`loss`), another split prefixes it (`val/loss`).
 */
export function seriesKey(split: Split, metric: string): string {
  return split === 'train' ? metric : `${split}/${metric}`;
}

/** The split and metric of a series key (`train/loss` is also read as the train `loss`). */
export function parseSeriesKey(key: string): { split: Split; metric: string } {
  const slash = key.indexOf('/');
  const head = key.slice(0, slash);
  if (slash > 0 && (head === 'train' || head === 'val' || head === 'test')) {
    return { split: head, metric: key.slice(slash + 1) };
  }
  return { split: 'train', metric: key };
}

export function fromWire(series: Series): SeriesData {
  return {
    steps: series.steps.slice(),
    values: series.values.slice(),
    decimated: series.decimated,
    rev: 1,
  };
}

export function emptySeries(): SeriesData {
  return { steps: [], values: [], decimated: false, rev: 0 };
}

/**
 * Add one streamed point; a step seen before replaces its value (a resumed run re-logging).
 *
 * Args: `maxPoints` is the budget the series is brought back to once it doubles.
 */
export function appendPoint(
  series: SeriesData,
  step: number,
  value: number | null,
  maxPoints: number,
): void {
  const { steps, values } = series;
  const n = steps.length;
  if (n === 0 || step > steps[n - 1]) {
    steps.push(step);
    values.push(value);
  } else {
    const i = lowerBound(steps, step);
    if (steps[i] === step) values[i] = value;
    else {
      steps.splice(i, 0, step);
      values.splice(i, 0, value);
    }
  }
  if (steps.length > 2 * maxPoints) {
    const kept = decimate(series, maxPoints);
    series.steps = kept.steps;
    series.values = kept.values;
    series.decimated = true;
  }
  series.rev++;
}

/** The splits in the order a chart draws them. */
export const SPLITS: readonly Split[] = ['train', 'val', 'test'];

/**
 * The chart a series belongs to: its metric name without the split, so `loss`, `val/loss`
 * and `test/loss` share one chart. A split's own prefix on the name is dropped too
 * (`val/val_loss` joins `loss`), as trainers often name validation metrics that way.
 */
export function chartName(key: string): string {
  const { split, metric } = parseSeriesKey(key);
  return split !== 'train' && metric.startsWith(`${split}_`) ? metric.slice(split.length + 1) : metric;
}

/**
 * Series keys grouped by chart (sorted by chart name), each group in split order with at
 * most one series per split: a second one (`test/acc` and `test/test_acc`) gets a chart of
 * its own, under its full key.
 */
export function chartGroups(keys: Iterable<string>): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const key of [...keys].sort()) {
    let name = chartName(key);
    const split = parseSeriesKey(key).split;
    if (groups.get(name)?.some((k) => parseSeriesKey(k).split === split)) name = key;
    const group = groups.get(name) ?? [];
    group.push(key);
    groups.set(name, group);
  }
  const rank = (key: string): number => SPLITS.indexOf(parseSeriesKey(key).split);
  for (const group of groups.values()) group.sort((a, b) => rank(a) - rank(b));
  return new Map([...groups].sort(([a], [b]) => a.localeCompare(b)));
}
