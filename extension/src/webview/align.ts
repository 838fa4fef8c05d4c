/**
 * Several series with their own steps drawn on one chart: uPlot wants one shared x array,
 * so the series are joined on the union of their steps. A step a series has no point at
 * gets `undefined`, which uPlot spans (the line goes on); a real gap stays `null`.
 */
import type { Points } from '../common/decimate';

export type Aligned = [number[], ...(number | null | undefined)[][]];

/**
 * Join `tables` on their steps (each sorted, without repeats).
 *
 * Example: `align([{steps: [1, 2], values: [5, 6]}, {steps: [2, 3], values: [7, 8]}])`
 * gives `[[1, 2, 3], [5, 6, undefined], [undefined, 7, 8]]`.
 */
export function align(tables: readonly Points[]): Aligned {
  if (tables.length === 1) return [tables[0].steps.slice(), tables[0].values.slice()];
  const steps = [...new Set(tables.flatMap((t) => t.steps))].sort((a, b) => a - b);
  const out: Aligned = [steps];
  for (const table of tables) {
    const column: (number | null | undefined)[] = new Array(steps.length).fill(undefined);
    let j = 0;
    for (let i = 0; i < table.steps.length; i++) {
      while (steps[j] < table.steps[i]) j++;
      column[j] = table.values[i];
    }
    out.push(column);
  }
  return out;
}
