/**
 * Wall-clock time of a step, from a run's clock anchors (one per second of training at most,
 * kept by the session server and by the page as metrics stream in): linear between two
 * anchors, the nearest anchor's time beyond the ends.
 */
import type { Clock } from '../protocol.gen';
import { lowerBound } from '../common/decimate';

/** The UNIX time (seconds) of `step`, or `null` when the run has no anchor yet. */
export function timeAt(clock: Clock, step: number): number | null {
  const { steps, times } = clock;
  if (steps.length === 0) return null;
  const i = lowerBound(steps, step);
  if (i === 0) return times[0];
  if (i >= steps.length) return times[steps.length - 1];
  const [s0, s1, t0, t1] = [steps[i - 1], steps[i], times[i - 1], times[i]];
  return s1 === s0 ? t1 : t0 + ((step - s0) / (s1 - s0)) * (t1 - t0);
}

/** `3h 02m`, `12m 05s`, `41s`, `0.4s`. */
export function formatDuration(seconds: number): string {
  if (!(seconds >= 0)) return '–';
  if (seconds < 10) return `${Number(seconds.toFixed(1))}s`;
  const s = Math.round(seconds);
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  const pad = (n: number): string => String(n).padStart(2, '0');
  if (h) return `${h}h ${pad(m)}m`;
  return m ? `${m}m ${pad(r)}s` : `${r}s`;
}

/** `14:03:27 (+12m 05s)`: the local time of day and the time since the run started. */
export function formatWallTime(time: number, startedAt: number): string {
  const day = new Date(time * 1000).toLocaleTimeString([], { hour12: false });
  return `${day} (+${formatDuration(time - startedAt)})`;
}
