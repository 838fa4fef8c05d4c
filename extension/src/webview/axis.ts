/**
 * The charts' x axis in steps or in epochs. Epoch `e` starts at step `epochStarts[e]`; a
 * step inside an epoch maps to a fraction of it, the last epoch using the previous one's
 * length (or, in the first epoch, the steps seen so far).
 */
import { upperBound } from '../common/decimate';

export type XAxis = 'step' | 'epoch';

/** Maps steps to the displayed x unit and back. */
export interface AxisMap {
  toX(step: number): number;
  toStep(x: number): number;
}

export const STEP_AXIS: AxisMap = { toX: (s) => s, toStep: (x) => x };

/** Args: `epochStarts` sorted; `lastStep` is the newest step (sizes the running epoch). */
export function epochAxis(epochStarts: readonly number[], lastStep: number): AxisMap {
  if (epochStarts.length === 0) return STEP_AXIS;
  const starts = epochStarts.slice();
  const n = starts.length;
  const lastLength =
    n >= 2 ? starts[n - 1] - starts[n - 2] : Math.max(1, lastStep - starts[n - 1] + 1);
  const length = (e: number): number => (e + 1 < n ? starts[e + 1] - starts[e] : lastLength) || 1;
  return {
    toX(step) {
      const e = Math.max(0, upperBound(starts, step) - 1);
      return e + (step - starts[e]) / length(e);
    },
    toStep(x) {
      const e = Math.min(n - 1, Math.max(0, Math.floor(x)));
      return starts[e] + (x - e) * length(e);
    },
  };
}

export function axisFor(axis: XAxis, epochStarts: readonly number[], lastStep: number): AxisMap {
  return axis === 'epoch' ? epochAxis(epochStarts, lastStep) : STEP_AXIS;
}
