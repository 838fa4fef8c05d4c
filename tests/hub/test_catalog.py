"""The hub's catalog: sessions followed as they appear, ended ones kept up to a bound."""

from __future__ import annotations

from onthefly.hub.catalog import Catalog
from tests.hub.client import eventually
from tests.live_session import live_session


def test_ended_sessions_are_kept_up_to_the_bound_oldest_forgotten_first() -> None:
    catalog = Catalog(None, None, keep_ended=1)
    try:
        keys = []
        for name in ("first", "second"):
            with live_session(run=name) as training:
                training.train(2)
                catalog.refresh()
                (row,) = [r for r in catalog.listing() if r["live"]]
                keys.append(row["key"])
                assert eventually(lambda key=row["key"]: catalog.broker(key))
            catalog.refresh()  # its discovery file is gone: the mirror ends
        listing = catalog.listing()
        assert [(r["key"], r["live"]) for r in listing] == [(keys[1], False)]
        assert catalog.broker(keys[0]) is None
        broker = catalog.broker(keys[1])
        assert broker is not None and [i.state for i in broker.run_infos()] == ["finished"]
    finally:
        catalog.close()
