/**
 * Chart markers: hyperparameter changes (one per step, its tooltip listing every change) and
 * alerts (where each was raised, its message as the tooltip).
 */
import type { Alert, HparamChange } from '../protocol.gen';
import { formatNumber } from './dom';
import type { Marker } from './charts';

const value = (v: HparamChange['old']): string =>
  v === null ? '?' : Array.isArray(v) ? `(${v.map((x) => formatNumber(x)).join(', ')})` : formatNumber(v);

/** `lr: 0.002 -> 0.0001 (group 0)`; the optimizer is named only when there are several. */
export function describeChange(change: HparamChange): string {
  const optimizer = change.optimizer ? `optimizer ${change.optimizer}, ` : '';
  return `${change.name}: ${value(change.old)} -> ${value(change.new)} (${optimizer}group ${change.group})`;
}

export function hparamMarkers(changes: readonly HparamChange[]): Marker[] {
  const byStep = new Map<number, string[]>();
  for (const change of changes) {
    const lines = byStep.get(change.step) ?? [];
    lines.push(describeChange(change));
    byStep.set(change.step, lines);
  }
  return [...byStep].map(([step, lines]) => ({ step, label: `step ${step}\n${lines.join('\n')}`, kind: 'hparam' as const }));
}

/** One marker per raised alert: red for errors (a NaN loss, a crash), orange for warnings. */
export function alertMarkers(alerts: readonly Alert[]): Marker[] {
  return alerts
    .filter((a) => a.state === 'raised')
    .map((a) => ({ step: a.step, label: `step ${a.step}\n${a.message}`, kind: a.severity === 'error' ? ('error' as const) : ('warning' as const) }));
}
