"""Benchmarks run in a temporary ONTHEFLY_HOME, like the tests, so no session file leaks."""

from collections.abc import Generator

import pytest

from tests.conftest import onthefly_home

__all__ = ["onthefly_home"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """Leave out the benchmarks that never finished a round (one stopped by its timeout).

    pytest-benchmark keeps such a benchmark with no timings, and its report (written first
    thing at the session's end, so this wraps it) then fails on it (``min()`` of nothing),
    losing every other figure of the run, which ``make bench`` takes RESULTS.md from; the
    benchmark's own failure is reported as usual.
    """
    bench_session = getattr(session.config, "_benchmarksession", None)
    if bench_session is not None:
        bench_session.benchmarks[:] = [bench for bench in bench_session.benchmarks if bench]
    return (yield)
