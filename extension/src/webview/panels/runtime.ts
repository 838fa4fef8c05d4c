/** The latest runtime sample of the selected run: step time, data wait, throughput, CPU, memory, GPUs. */
import type { RuntimeEvent } from '../../protocol.gen';
import { fill, formatBytes, formatNumber, h } from '../dom';

const ms = (seconds: number | null): string => (seconds === null ? '–' : `${formatNumber(seconds * 1000, 3)} ms`);

export class RuntimePanel {
  readonly element = h('section', { class: 'panel runtime', 'aria-label': 'Runtime' });
  private readonly body = h('dl', {});
  private last: RuntimeEvent | null | undefined;

  constructor() {
    this.element.append(h('h3', {}, 'Runtime'), this.body);
  }

  render(sample: RuntimeEvent | null): void {
    if (sample === this.last) return;
    this.last = sample;
    if (!sample) {
      fill(this.body, h('dd', { class: 'muted' }, 'No runtime sample yet.'));
      return;
    }
    const rows: [string, string][] = [
      ['Step time', ms(sample.step_time)],
      ['Data wait', ms(sample.data_wait)],
      ['Throughput', sample.samples_per_s === null ? '–' : `${formatNumber(sample.samples_per_s, 4)} samples/s`],
      ['CPU', sample.cpu_percent === null ? '–' : `${formatNumber(sample.cpu_percent, 3)} %`],
      ['RSS', formatBytes(sample.rss_bytes)],
    ];
    if (sample.cuda_allocated !== null) rows.push(['CUDA allocated', formatBytes(sample.cuda_allocated)]);
    if (sample.cuda_reserved !== null) rows.push(['CUDA reserved', formatBytes(sample.cuda_reserved)]);
    for (const gpu of sample.gpus) {
      const util = gpu.utilization === null ? '–' : `${formatNumber(gpu.utilization, 3)} %`;
      const mem = `${formatBytes(gpu.memory_used)} / ${formatBytes(gpu.memory_total)}`;
      const temp = gpu.temperature === null ? '' : `, ${formatNumber(gpu.temperature, 3)} °C`;
      rows.push([`GPU ${gpu.index}`, `${gpu.name}: ${util}, ${mem}${temp}`]);
    }
    if (sample.gpus.length === 0) rows.push(['GPU', 'none']);
    fill(this.body, ...rows.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
  }
}
