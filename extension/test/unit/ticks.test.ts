import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countLabel, countTicks, decimalsFor, isPowerOfTen, linearTickLabels, logTickLabels, logValue } from '../../src/webview/ticks';

/** The ticks uPlot places for an increment: its multiples inside [lo, hi] (with its float noise). */
function splits(lo: number, hi: number, increment: number): number[] {
  const out: number[] = [];
  for (let v = Math.ceil(lo / increment) * increment; v <= hi + increment * 1e-9; v += increment) out.push(v);
  return out;
}

test('labels at 2.5x spacing read what the gridline is (not 0.3 for 0.25, not 3 for 2.5)', () => {
  assert.deepEqual(linearTickLabels(splits(0, 1, 0.25), 0.25), ['0.00', '0.25', '0.50', '0.75', '1.00']);
  assert.deepEqual(linearTickLabels(splits(0, 10, 2.5), 2.5), ['0.0', '2.5', '5.0', '7.5', '10.0']);
  assert.deepEqual(linearTickLabels(splits(0, 100, 25), 25), ['0', '25', '50', '75', '100']);
  assert.deepEqual(linearTickLabels([0.0005, 0.001, 0.0015, 0.002], 0.0005), ['0.0005', '0.0010', '0.0015', '0.0020']);
  assert.deepEqual(linearTickLabels([-1e-17, 0.1], 0.1), ['0.0', '0.1'], 'float noise around zero reads 0');
});

test('tiny and huge magnitudes use exponents with the digits their increment needs', () => {
  assert.deepEqual(linearTickLabels([0.00025, 0.0005, 0.00075], 0.00025), ['2.5e-4', '5.0e-4', '7.5e-4']);
  assert.deepEqual(linearTickLabels([2e6, 4e6, 6e6], 2e6), ['2e+6', '4e+6', '6e+6']);
  assert.deepEqual(linearTickLabels([1.25e6, 2.5e6], 1.25e6), ['1.25e+6', '2.50e+6']);
});

test('over many ranges every label is distinct and reads back its tick exactly', () => {
  let cases = 0;
  for (let exponent = -9; exponent <= 9; exponent++) {
    for (const mantissa of [1, 2, 2.5, 5]) {
      const increment = mantissa * 10 ** exponent;
      for (const offset of [0, -3, 7, 1234, -98765]) {
        const lo = offset * increment;
        const ticks = splits(lo, lo + 6 * increment, increment);
        const labels = linearTickLabels(ticks, increment);
        assert.equal(new Set(labels).size, labels.length, `duplicate labels for increment ${increment}: ${labels}`);
        labels.forEach((label, i) => {
          const error = Math.abs(Number(label) - ticks[i]);
          assert.ok(error <= increment * 1e-6, `${label} for ${ticks[i]} (increment ${increment})`);
        });
        cases++;
      }
    }
  }
  assert.equal(cases, 19 * 4 * 5);
});

test('decimals that write an increment exactly', () => {
  assert.deepEqual([1, 0.5, 0.25, 2.5, 5e-5, 0.1 + 0.2, 20].map(decimalsFor), [0, 1, 2, 1, 5, 1, 0]);
});

test('log axes label their decades, and every tick over a narrow range', () => {
  assert.ok(isPowerOfTen(0.001) && isPowerOfTen(1000) && !isPowerOfTen(2000) && !isPowerOfTen(0));
  assert.deepEqual(['1e-4', '0.002', '0.5', '30', '2e+6'], [1e-4, 0.002, 0.5, 30, 2e6].map(logValue));
  assert.deepEqual(logTickLabels([0.001, 0.002, 0.01, 0.1, 1], 0.001, 2.3), ['0.001', '', '0.01', '0.1', '1']);
  assert.deepEqual(logTickLabels([1, 2, 5, 10], 1, 20), ['1', '2', '5', '10']);
});

test('count axes tick at round numbers from zero', () => {
  assert.deepEqual(countTicks(87, 4), [0, 20, 40, 60, 80]);
  assert.deepEqual(countTicks(3, 4), [0, 1, 2, 3]);
  assert.deepEqual(countTicks(0, 4), [0]);
  assert.deepEqual([950, 12_000, 3_400_000].map(countLabel), ['950', '12k', '3.4M']);
});
