"""The version of OnTheFly, for the parts that report it (the server's hello, session files)."""

__version__ = "0.2.0"
