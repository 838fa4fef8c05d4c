/**
 * Min/max decimation, the same rule as the session server's `history` command: the first
 * and last points are always kept, the points between are cut into equal buckets and each
 * bucket keeps its minimum and maximum in step order, so spikes survive at any zoom.
 */

export interface Points {
  steps: number[];
  values: (number | null)[];
}

/**
 * Reduce `points[lo, hi)` to at most `maxPoints` points.
 *
 * Args: `maxPoints` (>= 2); `lo`/`hi` bound the index range (default: everything).
 * Throws: RangeError when `maxPoints` is below 2.
 * Example: `decimate({steps: [0, 1, 2, 3], values: [0, 9, 1, 0]}, 3)` keeps steps 0, 1 and 3.
 */
export function decimate(
  points: Readonly<Points>,
  maxPoints: number,
  lo = 0,
  hi = points.steps.length,
): Points {
  if (!(maxPoints >= 2)) {
    throw new RangeError(`maxPoints must be at least 2, got ${maxPoints}`);
  }
  const { steps, values } = points;
  const count = hi - lo;
  if (count <= maxPoints) {
    return { steps: steps.slice(lo, hi), values: values.slice(lo, hi) };
  }
  const out: Points = { steps: [steps[lo]], values: [values[lo]] };
  const keep = (i: number): void => {
    out.steps.push(steps[i]);
    out.values.push(values[i]);
  };
  const inner = count - 2;
  const buckets = Math.floor((maxPoints - 2) / 2);
  for (let b = 0; b < buckets; b++) {
    const a = lo + 1 + Math.floor((b * inner) / buckets);
    const z = lo + 1 + Math.floor(((b + 1) * inner) / buckets);
    let iMin = -1;
    let iMax = -1;
    for (let i = a; i < z; i++) {
      const v = values[i];
      if (v === null || Number.isNaN(v)) continue;
      if (iMin < 0 || v < (values[iMin] as number)) iMin = i;
      if (iMax < 0 || v > (values[iMax] as number)) iMax = i;
    }
    if (iMin < 0) {
      if (a < z) keep(a); // an all-gap bucket still shows as a gap
    } else if (iMin === iMax) {
      keep(iMin);
    } else {
      keep(Math.min(iMin, iMax));
      keep(Math.max(iMin, iMax));
    }
  }
  keep(hi - 1);
  return out;
}

/** Index of the first element of the sorted `steps` that is >= `step`. */
export function lowerBound(steps: readonly number[], step: number): number {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (steps[mid] < step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first element of the sorted `steps` that is > `step`. */
export function upperBound(steps: readonly number[], step: number): number {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (steps[mid] <= step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
