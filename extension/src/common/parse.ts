/** Reading frames from the wire: JSON with a known `type`, or a clear error. */
import type { ServerMessage } from '../protocol.gen';

const SERVER_TYPES: Record<ServerMessage['type'], true> = {
  run_started: true,
  status: true,
  metrics: true,
  steps: true,
  epoch: true,
  runtime: true,
  log: true,
  test_result: true,
  health_result: true,
  hparam_change: true,
  hparam_error: true,
  scan_progress: true,
  fork_progress: true,
  lineage: true,
  alert: true,
  config: true,
  hello: true,
  batch: true,
  snapshot: true,
  coalesced: true,
  reply: true,
  error: true,
};

export class ProtocolError extends Error {
  override name = 'ProtocolError';
}

/**
 * Parse one server frame.
 *
 * The session server validates every message it sends against the same schema, so only
 * the envelope is checked here: a JSON object whose `type` is a server message type.
 * Throws: ProtocolError saying what was wrong and what was expected.
 * Example: `parseServerMessage('{"type":"coalesced","from_seq":1,"to_seq":2,"dropped":2}')`.
 */
export function parseServerMessage(frame: string): ServerMessage {
  let value: unknown;
  try {
    value = JSON.parse(frame);
  } catch (err) {
    throw new ProtocolError(`frame is not JSON (${String(err)}); expected a JSON object`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ProtocolError(`frame is ${describe(value)}; expected a JSON object`);
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string' || !Object.hasOwn(SERVER_TYPES, type)) {
    throw new ProtocolError(
      `frame has type ${JSON.stringify(type)}; expected one of ${Object.keys(SERVER_TYPES).join(', ')}`,
    );
  }
  if (type === 'batch' && !Array.isArray((value as { events?: unknown }).events)) {
    throw new ProtocolError('batch frame has no events list; expected {"type":"batch","events":[…]}');
  }
  return value as ServerMessage;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}
