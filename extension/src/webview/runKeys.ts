/**
 * How the page names a run (a session and a run id, as one string for what panels keep per
 * run) and which run it follows when the selected one's process ended or a `?run=`
 * parameter names one.
 */
import type { RunEntry, RunRef } from './panels/runPicker';

/** One string per run (session and run), for what panels keep per run. */
export function runKey(ref: RunRef): string {
  return `${ref.source}\u0000${ref.run}`;
}

export function parseRunKey(key: string): RunRef {
  const cut = key.indexOf('\u0000');
  return { source: key.slice(0, cut), run: key.slice(cut + 1) };
}

/**
 * The run to follow when the selected one's process ended: the newest live run of the same
 * project and name in another session (the run restarted), if any.
 */
export function restartOf(entries: readonly RunEntry[], ended: RunEntry): RunEntry | null {
  const live = entries.filter(
    (e) => !e.ended && e.ref.source !== ended.ref.source && e.project === ended.project && e.name === ended.name && e.startedAt >= ended.startedAt,
  );
  return live.sort((a, b) => b.startedAt - a.startedAt)[0] ?? null;
}

/** The entry a `?run=` parameter names (`name` or `project/name`), newest first. */
export function entryNamed(entries: readonly RunEntry[], wanted: string): RunEntry | null {
  const matches = entries.filter((e) => (wanted.includes('/') ? `${e.project}/${e.name}` === wanted : e.name === wanted));
  return matches.sort((a, b) => Number(a.ended) - Number(b.ended) || b.startedAt - a.startedAt)[0] ?? null;
}
