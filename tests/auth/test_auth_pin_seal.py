"""The LAN-share PIN is kept sealed in the auth store (auth/pin_seal.py): a keyed
hash checks it and a copy only the PIN key opens; the key comes from the API key,
so replicas sharing the key (and the store) check and show each other's PIN.
Here two AuthStates over one memory store stand for two replicas; the same over
a real redis-server is in test_auth_redis_outage.py."""

from __future__ import annotations

import dataclasses
import re

import pytest

from auth import AuthConfig, AuthState
from auth.pin_seal import PinSeal
from auth.store_memory import MemoryStore
from tests.auth.auth_harness import KEY
from tests.support.listeners import FakeListener

OTHER_KEY = "vgk-another-deployment-Kx7pR2mQ"


def replica(store: MemoryStore, api_key: str | None = KEY) -> AuthState:
    return AuthState(AuthConfig(server_mode=True, api_key=api_key), share_listener=FakeListener(), store=store)


def standalone(pin: str, text: str) -> bool:
    return re.search(rf"(?<![0-9]){pin}(?![0-9])", text) is not None


def test_a_sealed_pin_opens_and_matches_only_under_its_key() -> None:
    seal, other = PinSeal.from_api_key(KEY), PinSeal.from_api_key(OTHER_KEY)
    record = seal.seal("482913")
    assert not standalone("482913", record)
    assert (seal.owns(record), seal.open(record), seal.matches(record, "482913")) == (True, "482913", True)
    assert [seal.matches(record, guess) for guess in ("482914", "", "4829130", "48291", "\udcff")] == [False] * 5
    assert (other.owns(record), other.open(record), other.matches(record, "482913")) == (False, None, False)
    # the same PIN sealed twice looks different (a fresh nonce), and both open
    again = seal.seal("482913")
    assert again != record and seal.open(again) == "482913"
    # an altered copy opens to nothing (the keyed hash tells); a malformed record matches nothing
    version, key_id, nonce, sealed, mac = record.split(".")
    flipped = f"{int(sealed[:2], 16) ^ 1:02x}" + sealed[2:]
    assert seal.open(".".join((version, key_id, nonce, flipped, mac))) is None
    for broken in (record + "00", "v1." + key_id, "", "v0" + record[2:], record.replace(mac, "zz" * 32)):
        assert (seal.open(broken), seal.matches(broken, "482913")) == (None, False), broken


def test_without_an_api_key_each_process_draws_its_own_pin_key() -> None:
    record = PinSeal.from_api_key(None).seal("123456")
    assert PinSeal.from_api_key(None).open(record) is None
    with pytest.raises(ValueError, match="non-empty secret"):
        PinSeal(b"")


async def test_the_memory_store_holds_no_pin_in_clear_and_replicas_with_the_key_share_it() -> None:
    store = MemoryStore()
    a, b = replica(store), replica(store)
    info = await a.start_sharing(app=None)
    shared = await store.current_share()
    assert shared is not None
    assert not any(standalone(info.pin, str(value)) for value in dataclasses.astuple(shared))
    assert not standalone(info.pin, repr(vars(store)))
    # the other replica checks it and shows it
    assert await b.pin_matches(info.pin) is True
    assert await b.share.current() == info
    wrong = "000000" if info.pin != "000000" else "111111"
    assert await b.pin_matches(wrong) is False
    assert await store.pin_failure(shared.generation) == 2  # the wrong one was spent (this call is the 2nd)
    await a.aclose()


async def test_a_replica_with_another_key_sees_no_pin_and_spends_no_budget() -> None:
    store = MemoryStore()
    a, foreign = replica(store), replica(store, OTHER_KEY)
    info = await a.start_sharing(app=None)
    assert (await foreign.pin_active(), await foreign.share.current()) == (False, None)
    assert [await foreign.pin_matches(info.pin) for _ in range(3)] == [False] * 3
    shared = await store.current_share()
    assert shared is not None and await store.pin_failure(shared.generation) == 1  # nothing spent before
    assert await a.pin_matches(info.pin) is True
    await a.aclose()
