"""Admission: caps on served connections and per-source rates, decided without I/O."""

from __future__ import annotations

import http

from onthefly.server.admission import Admission, Kind, Limits


def test_authenticated_connections_are_capped_and_released() -> None:
    admission = Admission(Limits(max_connections=2))
    assert [admission.admit(Kind.AUTHENTICATED, "a", 0.0) for _ in range(2)] == [None, None]
    refused = admission.admit(Kind.AUTHENTICATED, "a", 0.0)
    assert refused is not None and refused.status == http.HTTPStatus.SERVICE_UNAVAILABLE
    assert "2 connections" in refused.text
    admission.release(Kind.AUTHENTICATED)
    assert admission.admit(Kind.AUTHENTICATED, "a", 0.0) is None
    assert admission.serving(Kind.AUTHENTICATED) == 2


def test_a_source_without_the_token_is_rate_limited_and_others_are_not() -> None:
    admission = Admission(Limits(source_rate=10, source_burst=3, max_unauthenticated=100))
    answers = [admission.admit(Kind.OTHER, "10.0.0.1", 0.0) for _ in range(4)]
    assert answers[:3] == [None, None, None]
    assert answers[3] is not None and answers[3].status == http.HTTPStatus.TOO_MANY_REQUESTS
    assert admission.admit(Kind.OTHER, "10.0.0.2", 0.0) is None  # another source
    assert admission.admit(Kind.AUTHENTICATED, "10.0.0.1", 0.0) is None  # the token wins
    assert admission.admit(Kind.OTHER, "10.0.0.1", 0.1) is None  # refilled at 10 a second


def test_unauthenticated_requests_in_progress_are_capped() -> None:
    admission = Admission(Limits(max_unauthenticated=2, source_burst=100))
    assert admission.admit(Kind.OTHER, "a", 0.0) is None
    assert admission.admit(Kind.OTHER, "b", 0.0) is None
    refused = admission.admit(Kind.OTHER, "c", 0.0)
    assert refused is not None and refused.status == http.HTTPStatus.SERVICE_UNAVAILABLE
    admission.release(Kind.OTHER)
    assert admission.admit(Kind.OTHER, "c", 0.0) is None


def test_the_sources_tracked_are_bounded_and_the_idlest_forgotten() -> None:
    admission = Admission(Limits(max_sources=2, source_rate=1, source_burst=1))
    for source in ("a", "b"):
        assert admission.admit(Kind.OTHER, source, 0.0) is None
        admission.release(Kind.OTHER)
    assert admission.admit(Kind.OTHER, "b", 0.0) is not None  # b is out of tokens
    assert admission.admit(Kind.OTHER, "c", 0.0) is None  # a, the idlest, is forgotten
    admission.release(Kind.OTHER)
    assert admission.admit(Kind.OTHER, "a", 0.0) is None  # a starts afresh


def test_the_thread_bound_counts_the_door_and_every_connection() -> None:
    limits = Limits(max_connections=10, max_unauthenticated=4)
    assert limits.max_threads == 1 + 3 * 10 + 2 * 4
