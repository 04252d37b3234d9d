"""F3 at the store: a value no database can hold is the caller's ``ValueError`` (or simply not
found), never ``StoreUnavailable``, on every backend; the store keeps working after it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from tests.store.test_contract import STORE_FACTORIES, pending
from voicegate.errors import StoreUnavailable
from voicegate.store.base import Store

UNSTORABLE = ["\udc00", "ps_\ud800", "a\x00b"]


@pytest.fixture(params=STORE_FACTORIES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    opened = await request.param(request)
    yield opened
    await opened.close()


@pytest.mark.parametrize("value", UNSTORABLE)
async def test_an_unstorable_id_is_a_value_error_or_absent_never_an_outage(
    store: Store, value: str
) -> None:
    lookups: list[Callable[[], Awaitable[object]]] = [
        lambda: store.pending.get(value),
        lambda: store.devices.get(value),
        lambda: store.ledger.consume(value, expires_at=1.0),
        lambda: store.receipts.for_pending(value, value),
    ]
    for lookup in lookups:
        try:
            found = await lookup()
        except StoreUnavailable:  # pragma: no cover - the failure this test exists to catch
            pytest.fail(f"{value!r} read as a store outage")
        except ValueError:
            found = None
        assert found in (None, True)
    await store.pending.create(pending())
    assert await store.pending.get("p1") is not None


async def test_an_unstorable_set_is_never_half_written(store: Store) -> None:
    try:
        await store.pending.create(pending("p2", user="\udc00"))
    except ValueError:
        assert await store.pending.get("p2") is None
    else:  # the memory store holds any Python string
        assert await store.pending.get("p2") is not None
