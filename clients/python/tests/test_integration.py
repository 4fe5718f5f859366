"""Integration tests, sync and async, against a real gateway (tests/gateway_server.ts, started by
the ``gateway`` fixture of conftest.py)."""

import asyncio
import uuid
from decimal import Decimal
from typing import Any, Dict

import pytest

from skill_gateway import (
    AsyncSkillGateway,
    AuthenticationError,
    InsufficientBalanceError,
    KeySpendLimitReachedError,
    NotFoundError,
    SkillError,
    SkillGateway,
)


def fast(client: Any) -> Any:
    client._initial_retry_delay = 0.02
    return client


def test_paid_call_costs_what_the_balance_drops(gateway: Dict[str, Any]) -> None:
    with fast(SkillGateway(api_key=gateway["key"], base_url=gateway["url"])) as client:
        before = client.balance().available
        result = client.call("echo", {"hello": "world"})
        after = client.balance().available
        assert result.data == {"hello": "world"}
        m = result.metadata
        assert m.skill_id == "echo" and m.cost > 0 and isinstance(m.cost, Decimal)
        assert before - after == m.cost
        assert m.cost == client.skills.get("echo").price_per_call
        assert m.call_id and m.response_time_ms >= 0
        assert m.rate_limit is not None and m.rate_limit.limit > 0


def test_per_skill_endpoint_and_its_camel_case_metadata(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        before = client.balance().available
        result = client.skill("uppercase").call(text="hi")
        after = client.balance().available
        assert result.data == {"text": "hi"}
        assert result.metadata.skill_id == "uppercase"
        assert result.metadata.cost == client.skills.get("uppercase").price_per_call > 0
        assert before - after == result.metadata.cost


def test_one_idempotency_key_charges_once(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        key = str(uuid.uuid4())
        before = client.balance().available
        first = client.call("echo", {"n": 1}, idempotency_key=key)
        second = client.call("echo", {"n": 1}, idempotency_key=key)
        assert second.data == first.data and second.metadata.replayed and not first.metadata.replayed
        assert before - client.balance().available == first.metadata.cost


def test_insufficient_balance(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["empty_key"], base_url=gateway["url"]) as client:
        with pytest.raises(InsufficientBalanceError) as info:
            client.call("echo", {"x": 1})
        assert info.value.status_code == 402 and info.value.message
        assert client.balance().available == 0


def test_key_spend_limit_reached(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["limited_key"], base_url=gateway["url"]) as client:
        client.call("echo", {"x": 1})
        before = client.balance().available
        with pytest.raises(KeySpendLimitReachedError) as info:
            client.call("echo", {"x": 2})
        assert isinstance(info.value, InsufficientBalanceError)
        assert (info.value.status_code, info.value.code) == (402, "key_spend_limit_reached")
        assert info.value.message.startswith("This key's spending limit of $0.001 in total is reached")
        assert client.balance().available == before


def test_bad_key(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key="atom_not_a_real_key", base_url=gateway["url"]) as client:
        with pytest.raises(AuthenticationError) as info:
            client.call("echo", {})
        assert info.value.status_code == 401


def test_unknown_skill(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        with pytest.raises(NotFoundError):
            client.call("no-such-skill", {})
        with pytest.raises(NotFoundError):
            client.skills.get("no-such-skill")


@pytest.mark.parametrize("slug", ["fail", "broken"])
def test_failing_skill_is_not_charged(gateway: Dict[str, Any], slug: str) -> None:
    with fast(SkillGateway(api_key=gateway["key"], base_url=gateway["url"])) as client:
        before = client.balance().available
        with pytest.raises(SkillError) as info:
            client.call(slug, {}, idempotency_key=f"fail-{uuid.uuid4()}")
        assert info.value.status_code == 502 and info.value.code
        # Retried under the same key, which the gateway frees after an uncharged failure.
        with pytest.raises(SkillError):
            client.skill(slug).call(x=1)
        assert client.balance().available == before


def test_reads_and_tool_schema(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        slugs = {s.slug for s in client.skills.list()}
        assert {"echo", "uppercase", "broken"} <= slugs
        tool = client.skills.get("uppercase").as_tool_schema()
        assert tool["type"] == "function" and tool["function"]["name"] == "uppercase"
        assert tool["function"]["parameters"]["required"] == ["text"]
        assert "$" in tool["function"]["description"]
        client.call("echo", {"usage": True})
        calls = list(client.usage(limit=2))
        assert len(calls) >= 3 and len({c.id for c in calls}) == len(calls)
        assert any(c.status == "failed" and c.cost == 0 for c in calls)


@pytest.mark.asyncio
async def test_async_paid_call_and_errors(gateway: Dict[str, Any]) -> None:
    async with AsyncSkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as client:
        before = (await client.balance()).available
        result = await client.skill("uppercase").call({"text": "async"})
        assert result.data == {"text": "async"}
        assert before - (await client.balance()).available == result.metadata.cost
        with pytest.raises(NotFoundError):
            await client.call("no-such-skill", {})
        with pytest.raises(SkillError):
            await fast(client).call("broken", {})
    async with AsyncSkillGateway(api_key=gateway["empty_key"], base_url=gateway["url"]) as client:
        with pytest.raises(InsufficientBalanceError):
            await client.call("echo", {})
    async with AsyncSkillGateway(api_key="atom_nope", base_url=gateway["url"]) as client:
        with pytest.raises(AuthenticationError):
            await client.balance()


@pytest.mark.asyncio
async def test_concurrent_async_calls_are_each_billed_once(gateway: Dict[str, Any]) -> None:
    async with fast(AsyncSkillGateway(api_key=gateway["concurrent_key"], base_url=gateway["url"])) as client:
        before = (await client.balance()).available
        results = await asyncio.gather(*(client.call("echo", {"i": i}) for i in range(20)))
        after = (await client.balance()).available
        assert sorted(r.data["i"] for r in results) == list(range(20))
        assert len({r.metadata.call_id for r in results}) == 20
        total = sum((r.metadata.cost for r in results), Decimal(0))
        assert total == 20 * results[0].metadata.cost and before - after == total
        # One page: GET /v1/usage pages by a millisecond timestamp (next_before), and 20
        # concurrent calls can share one, which a page boundary would split.
        calls = [c async for c in client.usage(limit=100)]
        assert len(calls) == 20 and all(c.status == "success" for c in calls)
        assert sum((c.cost for c in calls), Decimal(0)) == total
