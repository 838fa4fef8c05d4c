/**
 * Where the nodes of a lineage go: a small layered layout, drawn left to right.
 *
 * A node's column is one past the furthest of the nodes it comes from (its parent and, for
 * a merge, every merged fork), so every edge points right: the main run sits at the left,
 * a fork to the right of the model it was forked from, a merge to the right of everything
 * it merged. Rows are packed: each node claims its row from the column after its parent's
 * up to its own, so that the edge arriving from its parent runs through free space; the
 * main run and merges (the trunk that keeps training) prefer the top row, forks the rows
 * below. Two nodes never share a cell.
 */
import type { LineageEdge, LineageNode } from '../protocol.gen';

export const NODE_WIDTH = 156;
export const NODE_HEIGHT = 50;
export const COLUMN_GAP = 48;
export const ROW_GAP = 16;

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedNode extends Box {
  node: LineageNode;
  col: number;
  row: number;
}

export interface PlacedEdge {
  edge: LineageEdge;
  /** SVG path data from the source's right side to the target's left side. */
  path: string;
}

export interface Layout {
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  /** The box around every node. */
  bounds: Box;
}

/** Lay out `nodes` and `edges`; edges between unknown nodes are left out. */
export function layoutLineage(nodes: LineageNode[], edges: LineageEdge[]): Layout {
  const byId = new Map(nodes.map((n) => [n.run, n]));
  const known = edges.filter((e) => byId.has(e.source) && byId.has(e.target) && e.source !== e.target);
  const sources = new Map<string, string[]>();
  for (const node of nodes) sources.set(node.run, node.parent !== null && byId.has(node.parent) ? [node.parent] : []);
  for (const edge of known) {
    const list = sources.get(edge.target) as string[];
    if (!list.includes(edge.source)) list.push(edge.source);
  }
  const columns = columnsOf(nodes, sources);
  const order = nodes
    .map((node, index) => ({ node, index }))
    .sort((a, b) => columns.get(a.node.run)! - columns.get(b.node.run)! || (a.node.parent_step ?? 0) - (b.node.parent_step ?? 0) || a.index - b.index);
  const rows = new RowPacker();
  const placed = new Map<string, PlacedNode>();
  for (const { node } of order) {
    const col = columns.get(node.run)!;
    const parent = node.parent !== null ? columns.get(node.parent) : undefined;
    const from = parent === undefined ? col : Math.min(col, parent + 1);
    const row = rows.claim(from, col, node.kind === 'fork' ? 1 : 0);
    placed.set(node.run, {
      node,
      col,
      row,
      x: col * (NODE_WIDTH + COLUMN_GAP),
      y: row * (NODE_HEIGHT + ROW_GAP),
      width: NODE_WIDTH,
      height: NODE_HEIGHT,
    });
  }
  const placedEdges = known.map((edge) => ({ edge, path: edgePath(placed.get(edge.source)!, placed.get(edge.target)!) }));
  const list = nodes.map((n) => placed.get(n.run)!);
  return { nodes: list, edges: placedEdges, bounds: boundsOf(list) };
}

/** Longest path from a root, per node (a cycle, which a lineage never has, counts as a root). */
function columnsOf(nodes: LineageNode[], sources: Map<string, string[]>): Map<string, number> {
  const columns = new Map<string, number>();
  const visiting = new Set<string>();
  const column = (id: string): number => {
    const known = columns.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0;
    visiting.add(id);
    const from = sources.get(id) ?? [];
    const col = from.length ? 1 + Math.max(...from.map(column)) : 0;
    visiting.delete(id);
    columns.set(id, col);
    return col;
  };
  for (const node of nodes) column(node.run);
  return columns;
}

/** Rows as lists of claimed column spans. */
class RowPacker {
  private readonly rows: [number, number][][] = [];

  /** The first row at or below `preferred` whose columns `from`..`to` are free; claims them. */
  claim(from: number, to: number, preferred: number): number {
    for (let row = preferred; ; row++) {
      const spans = (this.rows[row] ??= []);
      if (spans.every(([a, b]) => b < from || a > to)) {
        spans.push([from, to]);
        return row;
      }
    }
  }
}

/** A horizontal S-curve from the right middle of `a` to the left middle of `b`. */
export function edgePath(a: Box, b: Box): string {
  const x1 = a.x + a.width;
  const y1 = a.y + a.height / 2;
  const x2 = b.x;
  const y2 = b.y + b.height / 2;
  const bend = Math.max(16, (x2 - x1) / 2);
  return `M${x1} ${y1}C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2}`;
}

function boundsOf(boxes: Box[]): Box {
  if (boxes.length === 0) return { x: 0, y: 0, width: 0, height: 0 };
  const x = Math.min(...boxes.map((b) => b.x));
  const y = Math.min(...boxes.map((b) => b.y));
  const right = Math.max(...boxes.map((b) => b.x + b.width));
  const bottom = Math.max(...boxes.map((b) => b.y + b.height));
  return { x, y, width: right - x, height: bottom - y };
}

