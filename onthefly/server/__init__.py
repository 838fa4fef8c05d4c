"""The in-process session server: a sans-I/O broker plus a thin websocket transport."""
