/**
 * The page's reducer: folds what the transport delivers into the dashboard state. The
 * wire messages go through the same reducer the extension host runs, so a state handed
 * over on `ready` and the messages relayed after it agree (duplicates drop by `seq`).
 */
import type { HostToView } from '../common/messages';
import {
  applyServerMessage,
  DEFAULT_LIMITS,
  newSource,
  unreachable,
  type DashboardState,
  type Limits,
} from '../common/state';

/** Apply one message; returns the (possibly replaced) state and whether it changed. */
export function applyHostMessage(
  state: DashboardState,
  message: HostToView,
  limits: Limits = DEFAULT_LIMITS,
): { state: DashboardState; changed: boolean } {
  switch (message.type) {
    case 'state':
      return { state: mergeHandedOver(state, message.state), changed: true };
    case 'source': {
      const source = (state.sources[message.source] ??= newSource(message.source, message.label));
      source.label = message.label;
      source.status = message.status;
      source.ended = message.ended;
      return { state, changed: true };
    }
    case 'server': {
      const source = (state.sources[message.source] ??= newSource(message.source, message.source));
      return { state, changed: applyServerMessage(source, message.message, limits) };
    }
    case 'result':
    case 'path':
    case 'notice':
      return { state, changed: false };
    default:
      return unreachable(message);
  }
}

/**
 * The host's state is the truth, but the page keeps runs the host has since forgotten
 * (finished runs stay viewable until the page closes).
 */
function mergeHandedOver(current: DashboardState, next: DashboardState): DashboardState {
  for (const [key, source] of Object.entries(current.sources)) {
    if (!next.sources[key]) next.sources[key] = { ...source, ended: true, status: 'closed' };
  }
  return next;
}
