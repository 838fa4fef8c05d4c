/**
 * Axis tick labels and tick positions.
 *
 * Linear axes: the ticks are multiples of one increment (1, 2, 2.5 or 5 × 10^k); each label
 * gets exactly the decimals that increment needs (0.25 → 2, 2.5 → 1, 5e-5 → 5), so no two
 * ticks ever read the same and none is rounded to a value it is not. Very large or very small
 * magnitudes are written in exponent form with the mantissa digits the increment needs.
 *
 * Log axes: powers of ten always get a label (`1e-3`, `0.01`, `1`, `100`); the ticks between
 * them only when the axis spans less than two decades.
 */

/** Digits after the point that write `increment` exactly (at most 15). */
export function decimalsFor(increment: number): number {
  if (!(increment > 0) || !Number.isFinite(increment)) return 0;
  for (let digits = 0; digits < 15; digits++) {
    const scaled = increment * 10 ** digits;
    if (Math.abs(scaled - Math.round(scaled)) <= 1e-9 * Math.max(1, Math.abs(scaled))) return digits;
  }
  return 15;
}

/**
 * Labels for linear ticks `splits`, `increment` apart.
 *
 * Example: `linearTickLabels([0, 0.25, 0.5, 0.75], 0.25)` gives `['0.00', '0.25', '0.50', '0.75']`.
 */
export function linearTickLabels(splits: readonly number[], increment: number): string[] {
  const magnitude = Math.max(0, ...splits.map((v) => Math.abs(v)));
  if (magnitude !== 0 && (magnitude >= 1e6 || magnitude < 1e-3)) {
    const exponent = Math.floor(Math.log10(magnitude));
    const digits = Math.min(6, decimalsFor(increment / 10 ** exponent));
    return splits.map((v) => (isZero(v, increment) ? '0' : v.toExponential(digits)));
  }
  const digits = Math.min(12, decimalsFor(increment));
  return splits.map((v) => (isZero(v, increment) ? (0).toFixed(digits) : v.toFixed(digits)));
}

/** A tick that is zero up to float noise (`-1.1e-17` is `0`, never `-0.00`). */
function isZero(value: number, increment: number): boolean {
  return Math.abs(value) < Math.abs(increment) * 1e-9;
}

/** Whether `value` is a power of ten (up to float noise). */
export function isPowerOfTen(value: number): boolean {
  if (!(value > 0)) return false;
  const exponent = Math.log10(value);
  return Math.abs(exponent - Math.round(exponent)) < 1e-9;
}

/** One log-axis value: `1e-4`, `0.002`, `0.5`, `30`, `2e+6`. */
export function logValue(value: number): string {
  if (value >= 1e-3 && value < 1e6) return String(Number(value.toPrecision(3)));
  const [mantissa, exponent] = value.toExponential(2).split('e');
  return `${Number(mantissa)}e${exponent}`;
}

/** Labels for log ticks `splits` over the axis `[min, max]` (see the module docstring). */
export function logTickLabels(splits: readonly number[], min: number, max: number): string[] {
  const decades = min > 0 && max > 0 ? Math.log10(max / min) : Infinity;
  return splits.map((v) => (isPowerOfTen(v) || decades < 2 ? logValue(v) : ''));
}

/**
 * About `count` round tick values covering `[0, max]`, 1, 2 or 5 × 10^k apart (a count axis).
 *
 * Example: `countTicks(87, 4)` gives `[0, 20, 40, 60, 80]`.
 */
export function countTicks(max: number, count: number): number[] {
  if (!(max > 0)) return [0];
  const raw = max / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  // The round step whose number of intervals comes closest to `count`.
  const candidates = [1, 2, 5, 10].map((m) => m * power);
  const step = candidates.reduce((best, s) => (Math.abs(max / s - count) < Math.abs(max / best - count) ? s : best));
  const whole = Math.max(1, Math.round(step));
  const ticks: number[] = [];
  for (let v = 0; v <= max + 1e-9; v += whole) ticks.push(v);
  return ticks;
}

/** A count as a short label: `950`, `12k`, `3.4M`. */
export function countLabel(value: number): string {
  if (value < 1000) return String(Math.round(value));
  if (value < 1e6) return `${Number((value / 1000).toPrecision(3))}k`;
  return `${Number((value / 1e6).toPrecision(3))}M`;
}
