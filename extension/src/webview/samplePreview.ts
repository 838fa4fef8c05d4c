/**
 * What a sample is, shown next to its numbers: the run's `sample_preview` answers (a
 * thumbnail, a text, or a tensor summary; see onthefly/samples/preview.py), read, kept per run
 * and split (the most recent few hundred), and drawn. Fetched only when a row or a point is
 * shown or hovered, at most 64 at a time.
 */
import type { CommandBody, Outcome } from '../common/messages';
import { h } from './dom';

export type PreviewKind = 'image' | 'text' | 'tensor' | 'error';

export interface SamplePreview {
  index: number;
  kind: PreviewKind;
  label?: number | string | boolean;
  text?: string;
  width?: number;
  height?: number;
  channels?: number;
  /** 8-bit pixels, row-major, channels last. */
  pixels?: Uint8Array;
}

/** Previews asked for in one command at most (the protocol's limit). */
export const MAX_PER_REQUEST = 64;
/** Previews kept per run and split. */
export const CACHE_SIZE = 512;

function decode(base64: string): Uint8Array {
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * The previews of a `sample_preview` reply; entries without an index are skipped.
 *
 * Throws: Error when the reply has no `previews` list.
 */
export function parsePreviews(data: Record<string, unknown>): SamplePreview[] {
  const list = data.previews;
  if (!Array.isArray(list)) throw new Error('sample_preview reply has no "previews" list');
  const out: SamplePreview[] = [];
  for (const raw of list as Record<string, unknown>[]) {
    if (typeof raw !== 'object' || raw === null || typeof raw.index !== 'number') continue;
    const kind = (['image', 'text', 'tensor', 'error'] as const).find((k) => k === raw.kind) ?? 'error';
    const preview: SamplePreview = { index: raw.index, kind };
    if (typeof raw.label === 'number' || typeof raw.label === 'string' || typeof raw.label === 'boolean') preview.label = raw.label;
    if (typeof raw.text === 'string') preview.text = raw.text;
    if (kind === 'image' && typeof raw.pixels === 'string') {
      const [width, height, channels] = [raw.width, raw.height, raw.channels].map(Number);
      const pixels = decode(raw.pixels);
      if (pixels.length === width * height * channels) Object.assign(preview, { width, height, channels, pixels });
      else Object.assign(preview, { kind: 'error', text: `thumbnail of ${pixels.length} bytes for ${width}×${height}×${channels}` });
    }
    out.push(preview);
  }
  return out;
}

/** RGBA pixels of a thumbnail (1: gray, 2: gray + alpha, 3: RGB, 4: RGBA). */
export function rgba(preview: SamplePreview): Uint8ClampedArray<ArrayBuffer> {
  const { width = 0, height = 0, channels = 1, pixels = new Uint8Array() } = preview;
  const out = new Uint8ClampedArray(new ArrayBuffer(width * height * 4));
  for (let i = 0; i < width * height; i++) {
    const p = pixels.subarray(i * channels, i * channels + channels);
    const gray = channels < 3;
    out[i * 4] = p[0];
    out[i * 4 + 1] = gray ? p[0] : p[1];
    out[i * 4 + 2] = gray ? p[0] : p[2];
    out[i * 4 + 3] = channels === 2 ? p[1] : channels === 4 ? p[3] : 255;
  }
  return out;
}

/** A preview as an element `size` CSS pixels tall (a thumbnail scales without smoothing). */
export function previewElement(preview: SamplePreview | undefined, size: number): HTMLElement {
  if (!preview) return h('span', { class: 'preview muted' }, '…');
  if (preview.kind === 'image' && preview.pixels && preview.width && preview.height) {
    const canvas = h('canvas', { class: 'preview-image', width: preview.width, height: preview.height, 'data-testid': 'preview-image' });
    const scale = size / Math.max(preview.width, preview.height);
    canvas.style.width = `${Math.round(preview.width * scale)}px`;
    canvas.style.height = `${Math.round(preview.height * scale)}px`;
    canvas.getContext('2d')?.putImageData(new ImageData(rgba(preview), preview.width, preview.height), 0, 0);
    return canvas;
  }
  const text = preview.text ?? '';
  return h('span', { class: `preview preview-${preview.kind}`, title: text, 'data-testid': `preview-${preview.kind}` }, text);
}

type Send = (command: CommandBody) => Promise<Outcome>;

/** Previews of one run and split, fetched on demand and kept (the most recent ones). */
export class PreviewCache {
  private readonly kept = new Map<number, SamplePreview>();
  private readonly asked = new Set<number>();

  constructor(
    private readonly send: Send,
    readonly split: string,
    private readonly size = 48,
  ) {}

  get(index: number): SamplePreview | undefined {
    return this.kept.get(index);
  }

  /** Fetch the previews of `indices` not kept yet; resolves once they arrived (or failed). */
  async fetch(indices: readonly number[]): Promise<void> {
    const missing = [...new Set(indices)].filter((i) => !this.kept.has(i) && !this.asked.has(i));
    for (let start = 0; start < missing.length; start += MAX_PER_REQUEST) {
      const batch = missing.slice(start, start + MAX_PER_REQUEST);
      for (const i of batch) this.asked.add(i);
      const indices = batch as [number, ...number[]]; // never empty: `missing` had this many
      const outcome = await this.send({ type: 'sample_preview', split: this.split as 'train', indices, size: this.size });
      for (const i of batch) this.asked.delete(i);
      if (!outcome.ok) {
        for (const index of batch) this.keep({ index, kind: 'error', text: outcome.message });
        continue;
      }
      try {
        for (const preview of parsePreviews(outcome.data)) this.keep(preview);
      } catch (err) {
        for (const index of batch) this.keep({ index, kind: 'error', text: (err as Error).message });
      }
    }
  }

  private keep(preview: SamplePreview): void {
    this.kept.delete(preview.index);
    this.kept.set(preview.index, preview);
    if (this.kept.size > CACHE_SIZE) this.kept.delete(this.kept.keys().next().value as number);
  }
}
