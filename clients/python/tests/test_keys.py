"""Keys made by code: ``client.keys`` (sync and async) against a real gateway (conftest.py), with a key that has
``keys:manage``: create, list, update and revoke keys for agents; the gateway's refusals as errors with their
code; create and revoke never sent twice."""

import datetime as dt
from decimal import Decimal
from typing import Any, Dict, List

import httpx
import pytest

from skill_gateway import (
    NOT_GIVEN,
    APIConnectionError,
    APIStatusError,
    AsyncSkillGateway,
    AuthenticationError,
    CreatedApiKey,
    NotFoundError,
    SkillGateway,
)
from skill_gateway._keys import key_body


def test_key_body_sends_what_is_given_and_none_as_null() -> None:
    when = dt.datetime(2027, 1, 31, 12, 0, tzinfo=dt.timezone.utc)
    assert key_body() == {}
    assert key_body(
        name="a", scopes=("calls",), allowed_skills=None, expires_at=when, spend_limit_usd=Decimal("0.50"), spend_limit_period="day", metadata={"agent": "x"}
    ) == {
        "name": "a",
        "scopes": ["calls"],
        "allowed_skills": None,
        "expires_at": "2027-01-31T12:00:00+00:00",
        "spend_limit_usd": "0.50",
        "spend_limit_period": "day",
        "metadata": {"agent": "x"},
    }
    assert key_body(expires_at=None, spend_limit_usd=None, metadata=None) == {"expires_at": None, "spend_limit_usd": None, "metadata": None}
    assert repr(NOT_GIVEN) == "NOT_GIVEN"
    with pytest.raises(ValueError, match="timezone-aware"):
        key_body(expires_at=dt.datetime(2027, 1, 31))


def test_sync_create_list_update_revoke(gateway: Dict[str, Any]) -> None:
    expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(days=7)
    with SkillGateway(api_key=gateway["manager_key"], base_url=gateway["url"]) as client:
        made = client.keys.create(
            "agent for u_42",
            allowed_skills=["echo"],
            expires_at=expires,
            spend_limit_usd="0.50",
            spend_limit_period="day",
            metadata={"agent": "researcher-7", "end_user": "u_42"},
        )
        assert isinstance(made, CreatedApiKey) and made.key.startswith("atom_")
        assert made.scopes == ["calls"] and made.allowed_skills == ["echo"]
        assert made.spend_limit_usd == Decimal("0.5") and made.spend_limit_period == "day"
        assert made.metadata == {"agent": "researcher-7", "end_user": "u_42"}
        assert dt.datetime.fromisoformat(made.expires_at.replace("Z", "+00:00")) == expires
        assert made.key not in repr(made)

        with SkillGateway(api_key=made.key, base_url=gateway["url"]) as agent:
            assert agent.call("echo", {"hi": 1}).metadata.cost == Decimal("0.001")
            # Its usage says which agent each call was for.
            (call,) = list(agent.usage())
            assert (call.api_key_id, call.api_key_name) == (made.id, "agent for u_42")
            assert call.api_key_metadata == {"agent": "researcher-7", "end_user": "u_42"}
            listed = {k.id: k for k in client.keys.list()}
            assert listed[made.id].spent_usd == Decimal("0.001")
            assert listed[made.id].metadata == {"agent": "researcher-7", "end_user": "u_42"}

            changed = client.keys.update(made.id, name="agent for u_43", metadata={"end_user": "u_43"}, expires_at=None)
            assert (changed.name, changed.metadata, changed.expires_at, changed.allowed_skills) == ("agent for u_43", {"end_user": "u_43"}, None, ["echo"])
            assert client.keys.update(made.id, spend_limit_period="month").spend_limit_period == "month"

            revoked = client.keys.revoke(made.id)
            assert (revoked.id, revoked.revoked) == (made.id, True)
            with pytest.raises(AuthenticationError):
                agent.call("echo", {})
        with pytest.raises(NotFoundError):
            client.keys.revoke(made.id)


def test_refusals_carry_their_status_and_code(gateway: Dict[str, Any]) -> None:
    with SkillGateway(api_key=gateway["manager_key"], base_url=gateway["url"]) as client:
        with pytest.raises(APIStatusError) as wider:
            client.keys.create(scopes=["calls", "funds:withdraw"])
        assert (wider.value.status_code, wider.value.code) == (403, "authority_exceeded")
        assert "funds:withdraw" in str(wider.value)
        with pytest.raises(APIStatusError) as bad:
            client.keys.create(metadata={"end user": "x"})
        assert (bad.value.status_code, bad.value.code) == (400, "invalid_request")
        with pytest.raises(APIStatusError) as calls:
            client.call("echo", {})
        assert (calls.value.status_code, calls.value.code) == (403, "scope_missing")
    with SkillGateway(api_key=gateway["key"], base_url=gateway["url"]) as caller:
        with pytest.raises(APIStatusError) as scope:
            caller.keys.list()
        assert (scope.value.status_code, scope.value.code) == (403, "scope_missing")


class _FailFirst(httpx.BaseTransport):
    """Fails the next request before it reaches the gateway whenever ``armed``; counts every attempt."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.armed = False
        self.attempts: List[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request.method)
        if self.armed:
            self.armed = False
            raise httpx.ConnectError("connection reset", request=request)
        return self.inner.handle_request(request)


def test_create_and_revoke_are_sent_once_list_and_update_retried(gateway: Dict[str, Any]) -> None:
    transport = _FailFirst()
    with SkillGateway(api_key=gateway["manager_key"], base_url=gateway["url"], http_client=httpx.Client(transport=transport)) as client:
        client._initial_retry_delay = 0.01
        before = len(client.keys.list())
        transport.armed, transport.attempts = True, []
        with pytest.raises(APIConnectionError):
            client.keys.create("once")
        assert transport.attempts == ["POST"]
        assert len(client.keys.list()) == before

        made = client.keys.create("twice?")
        transport.armed, transport.attempts = True, []
        with pytest.raises(APIConnectionError):
            client.keys.revoke(made.id)
        assert transport.attempts == ["DELETE"]

        transport.armed, transport.attempts = True, []
        assert any(k.id == made.id for k in client.keys.list())
        assert transport.attempts == ["GET", "GET"]
        transport.armed, transport.attempts = True, []
        assert client.keys.update(made.id, name="changed").name == "changed"
        assert transport.attempts == ["PATCH", "PATCH"]
        client.keys.revoke(made.id)


@pytest.mark.asyncio
async def test_async_create_list_update_revoke(gateway: Dict[str, Any]) -> None:
    async with AsyncSkillGateway(api_key=gateway["manager_key"], base_url=gateway["url"]) as client:
        made = await client.keys.create("async agent", metadata={"agent": "async-1"})
        assert made.scopes == ["calls"] and made.metadata == {"agent": "async-1"}
        assert any(k.id == made.id and k.metadata == {"agent": "async-1"} for k in await client.keys.list())
        changed = await client.keys.update(made.id, metadata=None, allowed_skills=["echo", "uppercase"])
        assert changed.metadata == {} and changed.allowed_skills == ["echo", "uppercase"]
        with pytest.raises(APIStatusError) as refused:
            await client.keys.update(made.id, scopes=["calls", "keys:manage"])
        assert refused.value.code == "authority_exceeded"
        assert (await client.keys.revoke(made.id)).revoked is True
        with pytest.raises(NotFoundError):
            await client.keys.update(made.id, name="gone")
