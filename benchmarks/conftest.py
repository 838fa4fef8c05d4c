"""Benchmarks run in a temporary ONTHEFLY_HOME, like the tests, so no session file leaks."""

from tests.conftest import onthefly_home

__all__ = ["onthefly_home"]
