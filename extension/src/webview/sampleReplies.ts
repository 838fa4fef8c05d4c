/**
 * The replies of the per-sample commands (`histogram`, `data_map`, `explorer`,
 * `selection_rows`, `selections`), read into what the panels draw. Point clouds become typed
 * arrays (NaN for the wire's `null`): a data map can hold hundreds of thousands of points.
 * A reply without the expected fields throws an Error naming what was wrong.
 */

export type SampleSplit = 'train' | 'val' | 'test';

/** Where a query's numbers come from, as every reply says. */
export interface QueryHeader {
  split: string;
  source: string;
  step: number;
}

export interface HistogramData extends QueryHeader {
  /** `counts.length + 1` increasing bin edges. */
  edges: Float64Array;
  counts: Float64Array;
  total: number;
  below: number;
  above: number;
  missing: number;
  min: number | null;
  max: number | null;
  mean: number | null;
}

/** Points of a scatter: position and the value that colours each one. */
export interface ScatterPoints {
  x: Float32Array;
  y: Float32Array;
  value: Float32Array;
  index: Float64Array;
}

export interface PointCloud extends QueryHeader {
  /** Samples of the split; `points` may be a subsample of them. */
  total: number;
  points: ScatterPoints;
  method?: string;
}

export const ROW_COLUMNS = ['index', 'loss', 'confidence', 'variability', 'correct', 'margin', 'count', 'label'] as const;
export type RowColumn = (typeof ROW_COLUMNS)[number];
export type SampleRow = Record<RowColumn, number | null>;

export interface RowsPage {
  name: string;
  total: number;
  offset: number;
  rows: SampleRow[];
}

export interface SelectionSummary {
  name: string;
  split: string;
  source: string;
  step: number;
  criterion: string;
  size: number;
}

type Data = Record<string, unknown>;

function header(data: Data): QueryHeader {
  return { split: String(data.split ?? ''), source: String(data.source ?? ''), step: Number(data.step ?? 0) };
}

function list(data: Data, key: string, what: string): unknown[] {
  const value = data[key];
  if (!Array.isArray(value)) throw new Error(`${what} reply has no "${key}" list`);
  return value;
}

function maybeNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** A numeric column as a typed array; `null` (NaN on the wire) becomes NaN. */
function column<T extends Float32Array | Float64Array>(make: new (n: number) => T, values: unknown[]): T {
  const out = new make(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    out[i] = typeof v === 'number' ? v : NaN;
  }
  return out;
}

export function parseHistogram(data: Data): HistogramData {
  const edges = column(Float64Array, list(data, 'edges', 'histogram'));
  const counts = column(Float64Array, list(data, 'counts', 'histogram'));
  if (counts.length === 0 || edges.length !== counts.length + 1) {
    throw new Error(`histogram reply has ${edges.length} edges for ${counts.length} bins; expected bins + 1`);
  }
  return {
    ...header(data),
    edges,
    counts,
    total: Number(data.total ?? 0),
    below: Number(data.below ?? 0),
    above: Number(data.above ?? 0),
    missing: Number(data.missing ?? 0),
    min: maybeNumber(data.min),
    max: maybeNumber(data.max),
    mean: maybeNumber(data.mean),
  };
}

function cloud(data: Data, what: string, x: string, y: string, value: string): PointCloud {
  const columns = [x, y, value, 'index'].map((key) => list(data, key, what));
  const n = columns[3].length;
  if (columns.some((c) => c.length !== n)) throw new Error(`${what} reply has columns of different lengths`);
  return {
    ...header(data),
    total: Number(data.total ?? n),
    points: {
      x: column(Float32Array, columns[0]),
      y: column(Float32Array, columns[1]),
      value: column(Float32Array, columns[2]),
      index: column(Float64Array, columns[3]),
    },
  };
}

/** The data map: x = variability, y = confidence, coloured by correctness. */
export function parseDataMap(data: Data): PointCloud {
  return cloud(data, 'data_map', 'variability', 'confidence', 'correct');
}

/** The explorer's 2-D projection, coloured by loss. */
export function parseExplorer(data: Data): PointCloud {
  return { ...cloud(data, 'explorer', 'x', 'y', 'loss'), method: String(data.method ?? '') };
}

export function parseRows(data: Data): RowsPage {
  const rows = list(data, 'rows', 'selection_rows').map((raw) => {
    const row = raw as Data;
    return Object.fromEntries(ROW_COLUMNS.map((c) => [c, maybeNumber(row[c])])) as SampleRow;
  });
  return { name: String(data.name ?? ''), total: Number(data.total ?? rows.length), offset: Number(data.offset ?? 0), rows };
}

export function parseSelections(data: Data): SelectionSummary[] {
  return list(data, 'selections', 'selections')
    .filter((s): s is Data => typeof s === 'object' && s !== null && typeof (s as Data).name === 'string')
    .map((s) => ({
      name: String(s.name),
      split: String(s.split ?? ''),
      source: String(s.source ?? ''),
      step: Number(s.step ?? 0),
      criterion: String(s.criterion ?? ''),
      size: Number(s.size ?? 0),
    }));
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

/** `parse(data)`, or why the reply could not be read (e.g. a session of another version). */
export function readReply<T>(parse: (data: Data) => T, data: Data): { value: T } | { error: string } {
  try {
    return { value: parse(data) };
  } catch (err) {
    return { error: `unexpected reply: ${err instanceof Error ? err.message : String(err)}` };
  }
}
