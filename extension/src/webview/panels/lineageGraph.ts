/**
 * The lineage of the selected run as a graph: the main run at the left, each fork to the
 * right of the model it was forked from, merges joining the models they merged. Each node
 * names its model, where it was made and how it stands; fork edges are solid, merge edges
 * dashed. Drag to pan, wheel to zoom around the cursor, Fit (or a new run) shows it all;
 * click a node (or Enter on it) to show its run in the picker and the charts: the run its
 * training metrics are in (a fork's own run; for a merge, the main run it continues in).
 */
import type { LineageNode, LineageView } from '../../protocol.gen';
import { fill, formatNumber, h, svg } from '../dom';
import { layoutLineage, type Box, type Layout, type PlacedNode } from '../lineageLayout';
import { fitView, panBy, viewBoxText, zoomAt, type Size } from '../viewBox';

/** Pointer travel (CSS pixels) under which a press is a click, not a drag. */
const CLICK_PX = 4;
/** Zoom per wheel pixel. */
const WHEEL_ZOOM = 0.002;
const MAX_NAME = 22;

export interface LineageHooks {
  /** Show run `run` (of the graph's session). */
  select(run: string): void;
  refresh(): void;
}

/** The node's second line: what it is and where it was made. */
export function nodeDetail(node: LineageNode): string {
  const at = node.parent_step !== null ? ` @ ${node.parent_step}` : '';
  switch (node.kind) {
    case 'main':
      return 'main run';
    case 'merge':
      return `${node.method ?? ''} merge${at}`;
    case 'fork': {
      const budget = node.budget ? Object.entries(node.budget).map(([unit, n]) => `${n} ${unit}`)[0] : undefined;
      const steps = node.steps !== null && node.status !== 'running' ? `${node.steps} steps` : budget;
      return `fork${at}${steps ? ` · ${steps}` : ''}`;
    }
  }
}

/** The node's third line: its status, and for a fork its slice loss before → after. */
export function nodeStatus(node: LineageNode): string {
  if (node.kind === 'fork' && node.slice_loss !== null && node.parent_slice_loss !== null) {
    return `${node.status} · slice ${formatNumber(node.parent_slice_loss, 3)} → ${formatNumber(node.slice_loss, 3)}`;
  }
  return node.status;
}

function tooltip(node: LineageNode): string {
  const lines = [`${node.name} (${node.kind}, ${node.status})`, nodeDetail(node)];
  const selection = node.selection;
  if (selection) lines.push(`slice: ${selection.name ?? JSON.stringify(selection.criterion)}, ${String(selection.size)} samples`);
  if (node.message) lines.push(node.message);
  lines.push('click to show this run');
  return lines.join('\n');
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

function shorten(text: string): string {
  return text.length > MAX_NAME ? `${text.slice(0, MAX_NAME - 1)}…` : text;
}

export class LineageGraph {
  readonly element = h('section', { class: 'panel lineage', 'aria-label': 'Lineage' });
  private readonly graph = svg('svg', { class: 'lineage-graph', 'data-testid': 'lineage', role: 'group', 'aria-label': 'Lineage graph' });
  private readonly layer = svg('g', {});
  private readonly caption = h('p', { class: 'muted plot-caption', 'data-testid': 'lineage-caption' });
  private readonly fitButton = h('button', { class: 'small', 'data-testid': 'lineage-fit', title: 'Show the whole graph' }, 'Fit');
  private readonly refreshButton = h('button', { class: 'small', title: 'Ask the run again' }, 'Refresh');
  private layout: Layout | null = null;
  private view: Box = { x: 0, y: 0, width: 1, height: 1 };
  /** Whether the view follows the graph (fit again when it changes) or the user moved it. */
  private following = true;
  private signature = '';
  private runKey = '';
  private drag: { x: number; y: number; moved: boolean; run: string | null } | null = null;
  private lineage: LineageView | null = null;
  /** The node clicked last: of the nodes sharing its metrics run, the one highlighted. */
  private clicked: string | null = null;

  constructor(private readonly hooks: LineageHooks) {
    this.graph.append(this.layer);
    this.graph.addEventListener('pointerdown', (e) => this.press(e));
    this.graph.addEventListener('pointermove', (e) => this.move(e));
    this.graph.addEventListener('pointerup', () => this.release());
    this.graph.addEventListener('pointercancel', () => (this.drag = null));
    this.graph.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
    this.graph.addEventListener('keydown', (e) => {
      const run = (e.target as Element).closest?.('[data-run]')?.getAttribute('data-run');
      if (run && (e.key === 'Enter' || e.key === ' ')) {
        e.preventDefault();
        this.choose(run);
      }
    });
    this.fitButton.addEventListener('click', () => this.fit());
    this.refreshButton.addEventListener('click', () => this.hooks.refresh());
    new ResizeObserver(() => this.following && this.fit()).observe(this.graph);
    this.element.append(
      h('h3', {}, 'Lineage'),
      h('div', { class: 'toolbar' }, this.fitButton, this.refreshButton, h('span', { class: 'muted readout' }, 'drag: pan · wheel: zoom · click: show run')),
      h('div', { class: 'plot-area lineage-area' }, this.graph),
      this.caption,
    );
  }

  /** Draw `lineage` of run `runKey`, `selected` (a run id) highlighted; a new run is fitted. */
  render(runKey: string, lineage: LineageView | null, selected: string, live: boolean): void {
    this.refreshButton.disabled = !live;
    if (runKey !== this.runKey) {
      this.runKey = runKey;
      this.following = true;
      this.clicked = null;
    }
    this.lineage = lineage;
    const signature = JSON.stringify([lineage, selected, this.clicked]);
    if (signature === this.signature) return;
    this.signature = signature;
    this.layout = lineage ? layoutLineage(lineage.nodes, lineage.edges) : null;
    this.draw(lineage, selected);
    if (this.following) this.fit();
  }

  /** Show the whole graph, and follow it as it grows until the user pans or zooms. */
  fit(): void {
    this.following = true;
    const size = this.size();
    if (!this.layout || size.width === 0) return;
    this.setView(fitView(this.layout.bounds, size));
  }

  private draw(lineage: LineageView | null, selected: string): void {
    const layout = this.layout;
    this.graph.dataset.nodes = String(layout?.nodes.length ?? 0);
    if (!layout || !lineage) {
      fill(this.layer);
      this.caption.textContent = 'No lineage yet.';
      return;
    }
    const edges = layout.edges.map(({ edge, path }) =>
      svg(
        'path',
        { class: `lineage-edge edge-${edge.kind}`, d: path, 'data-kind': edge.kind, 'data-source': edge.source, 'data-target': edge.target },
        svg('title', {}, edge.kind === 'fork' ? `forked at step ${edge.step}` : `merged (${edge.method ?? ''}) at step ${edge.step}`),
      ),
    );
    const clicked = lineage.nodes.find((n) => n.run === this.clicked && n.metrics_run === selected);
    const highlighted = clicked?.run ?? selected;
    fill(this.layer, ...edges, ...layout.nodes.map((placed) => this.node(placed, placed.node.run === highlighted, placed.node.run === lineage.active)));
    const forks = lineage.nodes.filter((n) => n.kind === 'fork').length;
    const merges = lineage.nodes.filter((n) => n.kind === 'merge').length;
    const active = lineage.nodes.find((n) => n.run === lineage.active)?.name ?? lineage.active;
    this.caption.textContent = forks || merges ? `${count(forks, 'fork')} · ${count(merges, 'merge')} · training continues from ${active}` : 'No forks yet: select samples (histogram, data map or a selection), then Fork…';
  }

  private node(placed: PlacedNode, selected: boolean, active: boolean): SVGGElement {
    const { node, x, y, width, height } = placed;
    const classes = ['lineage-node', `kind-${node.kind}`, `status-${node.status}`, selected ? 'selected' : '', active ? 'active' : ''];
    return svg(
      'g',
      {
        class: classes.filter(Boolean).join(' '),
        transform: `translate(${x} ${y})`,
        tabindex: 0,
        role: 'button',
        'data-testid': 'lineage-node',
        'data-run': node.run,
        'data-kind': node.kind,
        'data-status': node.status,
        'aria-label': `${node.name}: ${nodeDetail(node)}, ${node.status}`,
      },
      svg('title', {}, tooltip(node)),
      svg('rect', { width, height, rx: 4 }),
      svg('text', { x: 8, y: 15, class: 'node-name' }, shorten(node.name)),
      svg('text', { x: 8, y: 30, class: 'node-detail' }, nodeDetail(node)),
      svg('text', { x: 8, y: 44, class: 'node-status' }, nodeStatus(node)),
    );
  }

  private size(): Size {
    const box = this.graph.getBoundingClientRect();
    return { width: box.width, height: box.height };
  }

  private setView(view: Box): void {
    this.view = view;
    this.graph.setAttribute('viewBox', viewBoxText(view));
  }

  private press(e: PointerEvent): void {
    if (e.button !== 0) return;
    const run = (e.target as Element).closest?.('[data-run]')?.getAttribute('data-run') ?? null;
    this.drag = { x: e.clientX, y: e.clientY, moved: false, run };
  }

  private move(e: PointerEvent): void {
    const drag = this.drag;
    if (!drag) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < CLICK_PX) return;
    if (!drag.moved) {
      drag.moved = true;
      this.graph.setPointerCapture(e.pointerId);
      this.graph.classList.add('panning');
    }
    this.following = false;
    this.setView(panBy(this.view, this.size(), dx, dy));
    drag.x = e.clientX;
    drag.y = e.clientY;
  }

  private release(): void {
    const drag = this.drag;
    this.drag = null;
    this.graph.classList.remove('panning');
    if (drag && !drag.moved && drag.run) this.choose(drag.run);
  }

  /** Show the run of node `run`, and highlight that node. */
  private choose(run: string): void {
    const node = this.lineage?.nodes.find((n) => n.run === run);
    if (!node) return;
    this.clicked = run;
    this.hooks.select(node.metrics_run);
  }

  private wheel(e: WheelEvent): void {
    if (!this.layout) return;
    e.preventDefault();
    const box = this.graph.getBoundingClientRect();
    if (box.width === 0) return;
    this.following = false;
    const at = { x: (e.clientX - box.left) / box.width, y: (e.clientY - box.top) / box.height };
    this.setView(zoomAt(this.view, { width: box.width, height: box.height }, Math.exp(-e.deltaY * WHEEL_ZOOM), at));
  }
}
