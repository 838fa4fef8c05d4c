/**
 * The per-sample commands of a scripted session holding `n` samples with known statistics
 * (losses log-normal, a few in a far tail), answered like the real session answers them:
 * `histogram` binned here, `data_map` / `explorer` subsampled to `max_points`, `select` by
 * loss range or data-map region, `selections`, `selection_rows` pages, `export_selection`.
 */
export interface FakeSamples {
  n: number;
  /** The reply data of a per-sample command, or `undefined` for other commands. */
  answer(command: Record<string, unknown>): { data: Record<string, unknown> } | { code: string; message: string } | undefined;
}

/** A deterministic pseudo-random sequence in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const round = (v: number): number => Math.round(v * 1e5) / 1e5;

export function fakeSamples(n: number): FakeSamples {
  const next = random(7);
  const loss = new Float64Array(n);
  const confidence = new Float64Array(n);
  const variability = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const gauss = Math.sqrt(-2 * Math.log(next() || 1e-12)) * Math.cos(2 * Math.PI * next());
    loss[i] = Math.exp(gauss * 0.8 - 1) + (i % 1000 === 0 ? 6 : 0);
    confidence[i] = Math.exp(-loss[i]);
    variability[i] = 0.3 * next() * confidence[i] * (1 - confidence[i]) * 4;
  }
  const selections = new Map<string, { ids: number[]; split: string; criterion: string }>();

  const subsample = (max: number): number[] => {
    const count = Math.min(n, max);
    return Array.from({ length: count }, (_, k) => Math.floor((k * n) / count));
  };
  const row = (i: number): Record<string, number | null> => ({
    index: i,
    loss: loss[i],
    confidence: confidence[i],
    variability: variability[i],
    correct: confidence[i] > 0.5 ? 1 : 0,
    margin: null,
    count: 3,
    label: i % 10,
  });
  const header = { split: 'train', source: 'scan', step: 100 };

  return {
    n,
    answer(c) {
      switch (c.type) {
        case 'histogram': {
          const bins = Number(c.bins ?? 50);
          let lo = Infinity, hi = -Infinity;
          for (const v of loss) (lo = Math.min(lo, v)), (hi = Math.max(hi, v));
          const min = typeof c.min === 'number' ? c.min : lo;
          const max = typeof c.max === 'number' ? c.max : hi;
          const counts = new Array<number>(bins).fill(0);
          let below = 0, above = 0, sum = 0;
          for (const v of loss) {
            sum += v;
            if (v < min) below++;
            else if (v > max) above++;
            else counts[Math.min(bins - 1, Math.floor(((v - min) / (max - min)) * bins))]++;
          }
          const edges = Array.from({ length: bins + 1 }, (_, k) => min + ((max - min) * k) / bins);
          return { data: { ...header, split: c.split, edges, counts, total: n, below, above, missing: 0, min: lo, max: hi, mean: sum / n } };
        }
        case 'data_map':
        case 'explorer': {
          const rows = subsample(Number(c.max_points ?? 20_000));
          const common = { ...header, total: n, index: rows, loss: rows.map((i) => round(loss[i])) };
          if (c.type === 'explorer') {
            return { data: { ...common, method: 'pca', x: rows.map((i) => round(Math.cos(i) * loss[i])), y: rows.map((i) => round(Math.sin(i) * loss[i])) } };
          }
          return {
            data: {
              ...common,
              source: 'training',
              confidence: rows.map((i) => round(confidence[i])),
              variability: rows.map((i) => round(variability[i])),
              correct: rows.map((i) => (confidence[i] > 0.5 ? 1 : 0)),
            },
          };
        }
        case 'select': {
          let ids: number[] = [];
          if (typeof c.loss_min === 'number' || typeof c.loss_max === 'number') {
            const lo = Number(c.loss_min ?? -Infinity), hi = Number(c.loss_max ?? Infinity);
            for (let i = 0; i < n; i++) if (loss[i] >= lo && loss[i] <= hi) ids.push(i);
          } else if (typeof c.region === 'string') {
            const take = Math.round(n * Number(c.fraction ?? 1 / 3));
            const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => confidence[a] - confidence[b]);
            ids = c.region === 'easy' ? order.slice(n - take) : order.slice(0, take);
          } else return { code: 'unsupported', message: 'the fake session selects by loss range or region only' };
          ids.sort((a, b) => loss[b] - loss[a]);
          const name = String(c.name ?? 'selection');
          selections.set(name, { ids, split: String(c.split ?? 'train'), criterion: JSON.stringify(c) });
          const losses = ids.map((i) => loss[i]);
          return {
            data: { ...header, name, criterion: 'range', size: ids.length, created: 1, loss_mean: null, loss_min: losses.at(-1) ?? null, loss_max: losses[0] ?? null, preview: ids.slice(0, 20).map(row) },
          };
        }
        case 'selections':
          return { data: { selections: [...selections].map(([name, s]) => ({ name, split: s.split, source: 'scan', step: 100, criterion: s.criterion, size: s.ids.length, created: 1 })) } };
        case 'selection_rows': {
          const selection = selections.get(String(c.name));
          if (!selection) return { code: 'invalid_state', message: `no selection named ${String(c.name)}` };
          const key = String(c.sort ?? 'loss');
          const sign = c.descending === false ? 1 : -1;
          const rows = selection.ids.map(row).sort((a, b) => sign * (Number(a[key] ?? -Infinity) - Number(b[key] ?? -Infinity)));
          const offset = Number(c.offset ?? 0);
          return { data: { name: c.name, total: rows.length, offset, rows: rows.slice(offset, offset + Number(c.limit ?? 100)) } };
        }
        case 'export_selection': {
          const selection = selections.get(String(c.name));
          if (!selection) return { code: 'invalid_state', message: `no selection named ${String(c.name)}` };
          return { data: { name: c.name, path: `${String(c.directory)}/${String(c.name)}.${String(c.format)}`, rows: selection.ids.length, format: c.format, bytes: 100 * selection.ids.length } };
        }
        default:
          return undefined;
      }
    },
  };
}
