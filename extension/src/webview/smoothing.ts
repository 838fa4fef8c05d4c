/** Curve smoothing for charts. Gaps (`null`) stay gaps and do not reset the average. */

export type Smoothing =
  | { kind: 'none' }
  | { kind: 'ema'; weight: number }
  | { kind: 'mean'; window: number };

/**
 * Exponential moving average with TensorBoard's debiasing, so the curve starts at the
 * first value instead of creeping up from zero.
 *
 * Args: `weight` in [0, 1): 0 returns the values, 0.99 is very smooth.
 * Throws: RangeError for a weight outside [0, 1).
 * Example: `ema([1, 1, 1], 0.9)` is `[1, 1, 1]`.
 */
export function ema(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight >= 0 && weight < 1)) throw new RangeError(`EMA weight must be in [0, 1), got ${weight}`);
  const out: (number | null)[] = new Array(values.length);
  let last = 0;
  let count = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    count++;
    out[i] = last / (1 - weight ** count);
  }
  return out;
}

/**
 * Trailing moving average over the last `window` finite values.
 *
 * Throws: RangeError for a window below 1.
 * Example: `movingAverage([1, 2, 3, 4], 2)` is `[1, 1.5, 2.5, 3.5]`.
 */
export function movingAverage(values: readonly (number | null)[], window: number): (number | null)[] {
  if (!(Number.isInteger(window) && window >= 1)) {
    throw new RangeError(`moving-average window must be a whole number >= 1, got ${window}`);
  }
  const out: (number | null)[] = new Array(values.length);
  const ring: number[] = [];
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    ring.push(v);
    sum += v;
    if (ring.length > window) sum -= ring.shift() as number;
    out[i] = sum / ring.length;
  }
  return out;
}

export function smooth(values: readonly (number | null)[], smoothing: Smoothing): (number | null)[] {
  switch (smoothing.kind) {
    case 'none':
      return values.slice();
    case 'ema':
      return ema(values, smoothing.weight);
    case 'mean':
      return movingAverage(values, smoothing.window);
    default: {
      const unknown: never = smoothing;
      throw new RangeError(`unknown smoothing ${JSON.stringify(unknown)}`);
    }
  }
}
