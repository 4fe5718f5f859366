"""Budgets and price caps (issue 24, sections 2 and 3): ``max_price``, the budget headers in the
metadata, ``client.key()``, and the typed numbers of a 402 and a 409 ``price_above_max``; over
httpx.MockTransport, then against the real gateway (the ``gateway`` fixture of conftest.py)."""

import json
from decimal import Decimal
from typing import Any, Dict, List, Optional

import httpx
import pytest

from skill_gateway import (
    AsyncSkillGateway,
    ConflictError,
    InsufficientBalanceError,
    KeySpendLimitReachedError,
    KeyStatus,
    PriceAboveMaxError,
    SkillGateway,
)


class Recorder:
    """A MockTransport handler answering every request with one response, and the requests it saw."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self.requests: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer

    def body(self, i: int = 0) -> Any:
        return json.loads(self.requests[i].content)


def ok(headers: Optional[Dict[str, str]] = None) -> httpx.Response:
    return httpx.Response(200, json={"success": True, "data": {}, "metadata": {"skill_id": "echo", "price_paid": 0.001}}, headers=headers)


def refused(status: int, code: str, details: Dict[str, Any]) -> httpx.Response:
    return httpx.Response(status, json={"success": False, "error": "scripted", "code": code, "details": details})


def mocked(rec: Recorder, max_retries: int = 3) -> SkillGateway:
    client = SkillGateway(api_key="atom_test", base_url="http://gw.test", max_retries=max_retries, http_client=httpx.Client(transport=httpx.MockTransport(rec)))
    client._initial_retry_delay = 0.0
    client._sleep = lambda _: None  # type: ignore[assignment]
    return client


# -- over a mock transport -------------------------------------------------------------------


@pytest.mark.parametrize(
    "max_price,sent",
    [(Decimal("0.002"), "0.002"), (Decimal("2E-3"), "0.002"), ("0.002", "0.002"), (0.002, "0.002"), (1, "1"), (0.1 + 0.2, "0.30000000000000004")],
)
def test_call_sends_max_price_in_the_body_as_exact_decimal_text(max_price: Any, sent: str) -> None:
    rec = Recorder(ok())
    mocked(rec).call("echo", {"a": 1}, max_price=max_price)
    assert rec.body() == {"skill_id": "echo", "input": {"a": 1}, "max_price": sent}
    assert "x-max-price" not in rec.requests[0].headers


def test_call_without_max_price_sends_none() -> None:
    rec = Recorder(ok())
    mocked(rec).call("echo", {})
    assert rec.body() == {"skill_id": "echo", "input": {}}


def test_skill_handle_sends_x_max_price_and_keeps_the_body_the_skill_s() -> None:
    rec = Recorder(ok())
    handle = mocked(rec).skill("echo")
    handle.call(text="hi", max_price=Decimal("0.0015"))
    assert rec.requests[0].headers["x-max-price"] == "0.0015"
    assert rec.body() == {"text": "hi"}
    # A parameter of the skill named max_price goes in the mapping, and is no cap.
    handle.call({"max_price": 3})
    assert rec.body(1) == {"max_price": 3} and "x-max-price" not in rec.requests[1].headers


def test_max_price_must_be_an_amount() -> None:
    with pytest.raises(TypeError):
        mocked(Recorder(ok())).call("echo", {}, max_price=True)


def test_price_above_max_is_a_conflict_with_its_numbers_and_is_not_retried() -> None:
    rec = Recorder(refused(409, "price_above_max", {"price": 0.2, "max_price": 0.001}))
    with pytest.raises(ConflictError) as info:
        mocked(rec).call("echo", {}, max_price="0.001")
    error = info.value
    assert type(error) is PriceAboveMaxError
    assert (error.status_code, error.code, error.price, error.max_price) == (409, "price_above_max", Decimal("0.2"), Decimal("0.001"))
    assert len(rec.requests) == 1


def test_a_402_gives_its_numbers_as_typed_fields() -> None:
    rec = Recorder(refused(402, "insufficient_balance", {"price": 0.001, "available": 0.0005}))
    with pytest.raises(InsufficientBalanceError) as broke:
        mocked(rec).call("echo", {})
    assert (broke.value.price, broke.value.available) == (Decimal("0.001"), Decimal("0.0005"))
    details = {"price": 0.001, "available": 9.5, "limit": 5, "spent": 4.9995, "period": "day", "resets_at": "2026-11-23T00:00:00.000Z"}
    with pytest.raises(KeySpendLimitReachedError) as limited:
        mocked(Recorder(refused(402, "key_spend_limit_reached", details))).call("echo", {})
    e = limited.value
    assert (e.price, e.available, e.limit, e.spent, e.period, e.resets_at) == (
        Decimal("0.001"),
        Decimal("9.5"),
        Decimal("5"),
        Decimal("4.9995"),
        "day",
        "2026-11-23T00:00:00.000Z",
    )
    assert e.details == details
    # Without details, the numbers are None.
    with pytest.raises(InsufficientBalanceError) as bare:
        mocked(Recorder(httpx.Response(402, json={"success": False, "error": "x", "code": "insufficient_balance"}))).call("echo", {})
    assert (bare.value.price, bare.value.available, bare.value.details) == (None, None, {})


def test_metadata_reads_the_budget_headers_exactly() -> None:
    rec = Recorder(ok({"x-balance-available": "9.999", "x-key-spend-remaining": "0.004"}))
    m = mocked(rec).call("echo", {}).metadata
    assert (m.balance_available, m.key_spend_remaining) == (Decimal("9.999"), Decimal("0.004"))
    plain = mocked(Recorder(ok())).call("echo", {}).metadata
    assert (plain.balance_available, plain.key_spend_remaining) == (None, None)


@pytest.mark.asyncio
async def test_async_client_sends_max_price_and_raises_price_above_max() -> None:
    seen: List[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return refused(409, "price_above_max", {"price": 0.002, "max_price": 0.001})

    async with AsyncSkillGateway(api_key="atom_test", base_url="http://gw.test", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))) as client:
        with pytest.raises(PriceAboveMaxError) as info:
            await client.call("echo", {}, max_price=Decimal("0.001"))
        assert info.value.price == Decimal("0.002")
        with pytest.raises(PriceAboveMaxError):
            await client.skill("echo").call(max_price="0.001")
    assert json.loads(seen[0].content)["max_price"] == "0.001"
    assert seen[1].headers["x-max-price"] == "0.001" and len(seen) == 2


# -- against the real gateway ----------------------------------------------------------------


def test_max_price_against_the_gateway(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        price = client.skills.get("echo").price_per_call
        before = client.balance().available
        with pytest.raises(PriceAboveMaxError) as info:
            client.call("echo", {"x": 1}, max_price=price / 2)
        assert (info.value.price, info.value.max_price) == (price, price / 2)
        assert f"${price}" in info.value.message
        with pytest.raises(PriceAboveMaxError):
            client.skill("echo").call(x=1, max_price=price / 2)
        assert client.balance().available == before
        assert client.call("echo", {"x": 1}, max_price=price).metadata.cost == price
        assert client.skill("echo").call(x=1, max_price=str(price)).metadata.cost == price


def test_budget_headers_and_key_against_the_gateway(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["budget_key"], base_url=gateway["url"]) as client:
        m = client.call("echo", {"x": 1}).metadata
        own = client.key()
        assert isinstance(own, KeyStatus)
        assert m.balance_available == client.balance().available == own.available_usd
        assert m.key_spend_remaining == own.remaining_usd == Decimal("0.01") - m.cost
        assert (own.spend_limit_usd, own.spend_limit_period, own.spent_usd) == (Decimal("0.01"), "day", m.cost)
        assert own.scopes == ["calls", "usage:read"] and own.allowed_skills is None and own.expires_at is None


def test_402_details_against_the_gateway(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["empty_key"], base_url=gateway["url"]) as client:
        with pytest.raises(InsufficientBalanceError) as broke:
            client.call("echo", {})
        assert (broke.value.price, broke.value.available) == (Decimal("0.001"), Decimal("0"))
    with SkillGateway(api_key=gateway["capped_key"], base_url=gateway["url"]) as client:
        with pytest.raises(KeySpendLimitReachedError) as capped:
            client.call("echo", {})
        e = capped.value
        assert (e.price, e.available, e.limit, e.spent, e.period, e.resets_at) == (
            Decimal("0.001"),
            Decimal("1"),
            Decimal("0.0005"),
            Decimal("0"),
            "total",
            None,
        )


@pytest.mark.asyncio
async def test_async_max_price_and_key_against_the_gateway(gateway: Dict[str, Any]) -> None:
    async with AsyncSkillGateway(api_key=gateway["budget_key"], base_url=gateway["url"]) as client:
        with pytest.raises(PriceAboveMaxError):
            await client.skill("echo").call(max_price="0.0001")
        result = await client.call("echo", {}, max_price="0.001")
        own = await client.key()
        assert result.metadata.key_spend_remaining == own.remaining_usd
