/**
 * Per-sample replies as the panels draw them. A data map or a projection can hold hundreds of
 * thousands of points: their columns become typed arrays once (NaN for the wire's `null`),
 * which the scatter plots read without boxing. The replies themselves are the generated
 * protocol types (`DataMapReply`, `ExplorerReply`, `HistogramReply`, `RowsReply`, …).
 */
import type { DataMapReply, ExplorerReply, HistogramReply, SampleRow } from '../protocol.gen';

export type SampleSplit = HistogramReply['split'];

export const ROW_COLUMNS = ['index', 'loss', 'confidence', 'variability', 'correct', 'margin', 'count', 'label'] as const satisfies readonly (keyof SampleRow)[];
export type RowColumn = (typeof ROW_COLUMNS)[number];

/** Points of a scatter: position and the value that colours each one. */
export interface ScatterPoints {
  x: Float32Array;
  y: Float32Array;
  value: Float32Array;
  index: Float64Array;
}

export interface PointCloud {
  split: SampleSplit;
  source: string;
  step: number;
  /** Samples of the split; `points` may be a subsample of them. */
  total: number;
  points: ScatterPoints;
  method?: string;
}

/** A numeric column as a typed array; `null` becomes NaN. */
function column<T extends Float32Array | Float64Array>(make: new (n: number) => T, values: readonly (number | null)[]): T {
  const out = new make(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i] ?? NaN;
  return out;
}

function cloud(reply: DataMapReply | ExplorerReply, x: readonly (number | null)[], y: readonly (number | null)[], value: readonly (number | null)[]): PointCloud {
  return {
    split: reply.split,
    source: reply.source,
    step: reply.step,
    total: reply.total,
    points: { x: column(Float32Array, x), y: column(Float32Array, y), value: column(Float32Array, value), index: column(Float64Array, reply.index) },
  };
}

/** The data map: x = variability, y = confidence, coloured by correctness. */
export function dataMapCloud(reply: DataMapReply): PointCloud {
  return cloud(reply, reply.variability, reply.confidence, reply.correct);
}

/** The explorer's 2-D projection, coloured by loss. */
export function explorerCloud(reply: ExplorerReply): PointCloud {
  return { ...cloud(reply, reply.x, reply.y, reply.loss), method: reply.method };
}

/** A selection name the session accepts (`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`). */
export function selectionName(...parts: (string | number)[]): string {
  const text = parts
    .map((p) => (typeof p === 'number' ? Number(p.toPrecision(3)).toString() : p))
    .join('-')
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[^A-Za-z0-9]+/, '');
  return (text || 'selection').slice(0, 64);
}
