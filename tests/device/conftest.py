"""Fixtures: a gate over a real memory store, a moved clock, an app with the device routes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.device.kit import Executed, SigningDevice, paired_device
from voicegate.clock import ManualClock
from voicegate.device.routes import device_router
from voicegate.gate.core import Gate, GatePolicy
from voicegate.secrets import KeyRing
from voicegate.services import Services
from voicegate.store import open_store
from voicegate.store.base import Store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def executed() -> Executed:
    return Executed()


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    opened = await open_store("memory")
    yield opened
    await opened.close()


@pytest.fixture
def services(store: Store, clock: ManualClock, executed: Executed) -> Services:
    gate = Gate(
        store,
        executor=executed,
        policy=GatePolicy(is_write=lambda tool: True),
        receipt_keys=KeyRing.generate(),
        clock=clock,
    )
    return Services(store=store, gate=gate, clock=clock)


@pytest.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(device_router(services))
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture
async def device(
    client: httpx.AsyncClient, services: Services, clock: ManualClock
) -> SigningDevice:
    return await paired_device(client, services, clock)
