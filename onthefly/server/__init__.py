"""The in-process session server: a sans-I/O broker plus a thin websocket transport.

Modules, one job each::

    session_server  SessionServer: wires everything, owns the publish buffer and pump
    broker          numbering, run state, replay ring, command routing (no I/O)
    staging         published events validated, enveloped and serialised for the broker
    outbox          one client's bounded queue, coalescing telemetry
    commands        frame -> command or error; the per-client rate limit
    runs            run state rebuilt from events; snapshots
    history         compact metric series and min/max decimation
    pending         PendingCommand: a control command for the training thread
    gate            handshake checks (token, origin, host) and static files
    transport       websockets.sync server, per-client sender threads
    discovery       the files that let clients find live sessions
"""

from onthefly.server.pending import PendingCommand
from onthefly.server.session_server import SessionServer

__all__ = ["PendingCommand", "SessionServer"]
