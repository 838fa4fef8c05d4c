/**
 * Colours the dashboard draws data with: the Okabe–Ito palette, told apart with every common
 * colour-vision deficiency (and readable on the dark and light editor themes). Runs compared
 * on one chart take one colour each, in order; a single run's splits take the first three.
 */

/** Okabe–Ito, ordered so that neighbours differ most (yellow and blue come late). */
export const PALETTE = ['#56B4E9', '#E69F00', '#009E73', '#CC79A7', '#D55E00', '#F0E442', '#0072B2', '#BBBBBB'] as const;

/** The colours of a run's splits on its own charts. */
export const SPLIT_COLORS = { train: PALETTE[0], val: PALETTE[1], test: PALETTE[2] } as const;

/** The colour of the `index`-th run compared (the palette repeats after eight). */
export function runColor(index: number): string {
  return PALETTE[((index % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

/**
 * Colour indices for the runs `keys`: those in `assigned` keep theirs, the others take the
 * smallest free ones, in order. Returns the new assignment (for the page to remember).
 *
 * Example: `assignColors(['a', 'b'], {b: 0})` gives `{b: 0, a: 1}`.
 */
export function assignColors(keys: readonly string[], assigned: Readonly<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  const used = new Set<number>();
  for (const key of keys) {
    if (Object.hasOwn(assigned, key)) {
      out[key] = assigned[key];
      used.add(assigned[key]);
    }
  }
  let next = 0;
  for (const key of keys) {
    if (Object.hasOwn(out, key)) continue;
    while (used.has(next)) next++;
    out[key] = next;
    used.add(next);
  }
  return out;
}

/** `#rrggbb` with an alpha (for faint lines and fills). */
export function withAlpha(hex: string, alpha: number): string {
  const a = Math.round(Math.max(0, Math.min(1, alpha)) * 255)
    .toString(16)
    .padStart(2, '0');
  return `${hex}${a}`;
}
