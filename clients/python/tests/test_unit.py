"""Unit tests over httpx.MockTransport: no gateway, no network."""

import json
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional

import httpx
import pytest

import skill_gateway
from skill_gateway import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncSkillGateway,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientBalanceError,
    KeySpendLimitReachedError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    SkillError,
    SkillGateway,
    SkillGatewayError,
)
from skill_gateway._base import parse_retry_after

Handler = Callable[[httpx.Request], httpx.Response]


def ok(data: Any = None, metadata: Optional[Dict[str, Any]] = None, headers: Optional[Dict[str, str]] = None) -> httpx.Response:
    return httpx.Response(200, json={"success": True, "data": data, "metadata": metadata or {}}, headers=headers)


def fail(status: int, error: str = "nope", code: Optional[str] = None, headers: Optional[Dict[str, str]] = None) -> httpx.Response:
    body: Dict[str, Any] = {"success": False, "error": error}
    if code:
        body["code"] = code
    return httpx.Response(status, json=body, headers=headers)


class Recorder:
    """A MockTransport handler answering from a script, and the requests it saw."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def keys(self) -> List[Optional[str]]:
        return [r.headers.get("idempotency-key") for r in self.requests]


def sync_client(handler: Handler, **kwargs: Any) -> SkillGateway:
    client = SkillGateway(api_key="atom_test", base_url="http://gw.test/", http_client=httpx.Client(transport=httpx.MockTransport(handler)), **kwargs)
    client._initial_retry_delay = 0.0
    client._sleeps = []  # type: ignore[attr-defined]
    client._sleep = client._sleeps.append  # type: ignore[attr-defined]
    return client


def async_client(handler: Handler, **kwargs: Any) -> AsyncSkillGateway:
    client = AsyncSkillGateway(api_key="atom_test", base_url="http://gw.test", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), **kwargs)
    client._initial_retry_delay = 0.0
    sleeps: List[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client._sleeps = sleeps  # type: ignore[attr-defined]
    client._sleep = sleep  # type: ignore[assignment]
    return client


# -- configuration ---------------------------------------------------------------------------


def test_defaults_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_GATEWAY_API_KEY", "atom_env")
    monkeypatch.setenv("SKILL_GATEWAY_URL", "http://env.test:9/")
    client = SkillGateway()
    assert client.api_key == "atom_env" and client.base_url == "http://env.test:9"
    assert SkillGateway(api_key="atom_x", base_url="http://x").api_key == "atom_x"
    monkeypatch.delenv("SKILL_GATEWAY_URL")
    monkeypatch.delenv("SKILL_GATEWAY_API_KEY")
    client = SkillGateway()
    assert client.base_url == "http://127.0.0.1:8787" and client.api_key is None
    assert client.max_retries == 2


def test_rejects_bad_options() -> None:
    with pytest.raises(ValueError):
        SkillGateway(max_retries=-1)
    with pytest.raises(ValueError):
        SkillGateway(timeout=0)


def test_version_and_exports() -> None:
    assert skill_gateway.__version__ == "0.1.0"
    for name in skill_gateway.__all__:
        assert hasattr(skill_gateway, name)
    assert issubclass(APITimeoutError, APIConnectionError)
    for cls in (BadRequestError, AuthenticationError, InsufficientBalanceError, NotFoundError, ConflictError, RateLimitError, InternalServerError, SkillError):
        assert issubclass(cls, APIStatusError) and issubclass(cls, SkillGatewayError)
    assert issubclass(KeySpendLimitReachedError, InsufficientBalanceError)


# -- calls, metadata ---------------------------------------------------------------------------


def test_call_sends_envelope_and_reads_snake_case_metadata() -> None:
    rec = Recorder(
        ok(
            {"echo": 1},
            {"skill_id": "echo", "response_time_ms": 12, "price_paid": 0.001},
            {"x-call-id": "call-1", "ratelimit-limit": "100", "ratelimit-remaining": "99", "ratelimit-reset": "60"},
        )
    )
    with sync_client(rec) as client:
        result = client.call("echo", {"a": 1}, idempotency_key="key-1")
    req = rec.requests[0]
    assert req.method == "POST" and str(req.url) == "http://gw.test/v1/call"
    assert req.headers["authorization"] == "Bearer atom_test"
    assert req.headers["idempotency-key"] == "key-1"
    assert req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {"skill_id": "echo", "input": {"a": 1}}
    assert result.data == {"echo": 1}
    m = result.metadata
    assert m.skill_id == "echo" and m.cost == Decimal("0.001") and isinstance(m.cost, Decimal)
    assert m.response_time_ms == 12 and m.call_id == "call-1" and m.idempotency_key == "key-1"
    assert m.rate_limit is not None and (m.rate_limit.limit, m.rate_limit.remaining, m.rate_limit.reset) == (100, 99, 60.0)
    assert (m.rate_limit_limit, m.rate_limit_remaining, m.rate_limit_reset) == (100, 99, 60.0)
    assert m.replayed is False


def test_skill_handle_sends_flat_body_and_reads_camel_case_metadata() -> None:
    rec = Recorder(ok({"text": "HI"}, {"skillId": "uppercase", "cost": 0.002, "responseTime": 7}, {"idempotent-replayed": "true"}))
    with sync_client(rec) as client:
        result = client.skill("upper case").call(text="hi")
    req = rec.requests[0]
    assert str(req.url) == "http://gw.test/v1/skills/upper%20case/call"
    assert json.loads(req.content) == {"text": "hi"}
    m = result.metadata
    assert (m.skill_id, m.cost, m.response_time_ms) == ("uppercase", Decimal("0.002"), 7)
    assert m.call_id is None and m.replayed is True and m.rate_limit is None
    # A generated key: a UUID.
    assert len(m.idempotency_key) == 36 and rec.keys == [m.idempotency_key]


def test_both_casings_give_the_same_metadata() -> None:
    snake = Recorder(ok(1, {"skill_id": "echo", "response_time_ms": 5, "price_paid": 0.001}))
    camel = Recorder(ok(1, {"skillId": "echo", "responseTime": 5, "cost": 0.001}))
    a = sync_client(snake).call("echo", {}, idempotency_key="k").metadata
    b = sync_client(camel).skill("echo").call({}, idempotency_key="k").metadata
    assert a == b


def test_skill_handle_accepts_a_mapping_and_reserved_names() -> None:
    rec = Recorder(ok())
    sync_client(rec).skill("s").call({"timeout": 3, "idempotency_key": "field"}, extra=1)
    assert json.loads(rec.requests[0].content) == {"timeout": 3, "idempotency_key": "field", "extra": 1}


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status,cls",
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (402, InsufficientBalanceError),
        (404, NotFoundError),
        (409, ConflictError),
        (422, ConflictError),
        (429, RateLimitError),
        (500, InternalServerError),
        (502, SkillError),
        (403, APIStatusError),
        (503, APIStatusError),
    ],
)
def test_error_mapping(status: int, cls: type) -> None:
    # "the_code" is no code of the gateway's: the class comes from the status.
    rec = Recorder(fail(status, "the message", "the_code", {"x-call-id": "c-9"}))
    with pytest.raises(cls) as info:
        sync_client(rec, max_retries=0).call("echo", {}, idempotency_key="k")
    error = info.value
    assert type(error) is cls
    assert (error.status_code, error.code, error.message, error.call_id, error.idempotency_key) == (status, "the_code", "the message", "c-9", "k")
    assert error.response is not None and error.headers is not None
    assert "the message" in str(error) and str(status) in str(error)


def test_key_spend_limit_is_an_insufficient_balance_of_its_own_kind() -> None:
    rec = Recorder(fail(402, "This key's spending limit of $5.00 per day is reached.", "key_spend_limit_reached"))
    with pytest.raises(InsufficientBalanceError) as info:
        sync_client(rec, max_retries=3).call("echo", {})
    assert type(info.value) is KeySpendLimitReachedError
    assert (info.value.status_code, info.value.code) == (402, "key_spend_limit_reached")
    assert "spending limit" in str(info.value)
    assert len(rec.requests) == 1


def test_key_spend_limit_code_on_another_status_keeps_the_status_class() -> None:
    rec = Recorder(fail(400, "odd", "key_spend_limit_reached"))
    with pytest.raises(BadRequestError) as info:
        sync_client(rec, max_retries=0).call("echo", {})
    assert type(info.value) is BadRequestError


def test_error_without_envelope() -> None:
    rec = Recorder(httpx.Response(503, text="<html>bad gateway</html>"))
    with pytest.raises(APIStatusError) as info:
        sync_client(rec, max_retries=0).balance()
    assert info.value.code == "http_503" and "503" in info.value.message


def test_non_envelope_success_is_an_error() -> None:
    rec = Recorder(httpx.Response(200, json={"hello": "proxy"}))
    with pytest.raises(APIStatusError) as info:
        sync_client(rec).call("echo", {})
    assert info.value.code == "invalid_response" and len(rec.requests) == 1


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status,code", [(500, "internal_error"), (502, "skill_timeout"), (502, "skill_error"), (502, "skill_unreachable")])
def test_never_retries_where_the_seller_may_have_worked_by_default(status: int, code: str) -> None:
    rec = Recorder(fail(status, "x", code), ok())
    with pytest.raises(SkillGatewayError) as info:
        sync_client(rec, max_retries=5).call("echo", {})
    assert info.value.status_code == status and len(rec.requests) == 1


def test_never_retries_a_forbidden_backend_even_when_asked() -> None:
    rec = Recorder(fail(502, "x", "skill_backend_forbidden"), ok())
    with pytest.raises(SkillError):
        sync_client(rec, max_retries=5, retry_skill_failures=True).call("echo", {})
    assert len(rec.requests) == 1


def test_a_call_overrides_the_clients_retry_skill_failures() -> None:
    rec = Recorder(fail(502, "x", "skill_timeout"), ok({"x": 1}))
    assert sync_client(rec).call("echo", {}, retry_skill_failures=True).data == {"x": 1}
    assert len(rec.requests) == 2
    rec = Recorder(fail(502, "x", "skill_timeout"), ok({"x": 1}))
    with pytest.raises(SkillError):
        sync_client(rec, retry_skill_failures=True).skill("echo").call(retry_skill_failures=False)
    assert len(rec.requests) == 1


@pytest.mark.parametrize("status", [500, 502])
def test_retries_5xx_with_the_same_idempotency_key_when_asked(status: int) -> None:
    rec = Recorder(fail(status), fail(status), ok({"x": 1}, {"price_paid": 0.001}))
    client = sync_client(rec, retry_skill_failures=True)
    result = client.call("echo", {})
    assert result.data == {"x": 1}
    assert len(rec.requests) == 3
    assert len(set(rec.keys)) == 1 and rec.keys[0] == result.metadata.idempotency_key
    assert len(client._sleeps) == 2  # type: ignore[attr-defined]
    assert [r.content for r in rec.requests] == [rec.requests[0].content] * 3


def test_gives_up_after_max_retries() -> None:
    rec = Recorder(fail(502, "skill down", "skill_error"))
    with pytest.raises(SkillError) as info:
        sync_client(rec, max_retries=2).call("echo", {}, idempotency_key="mine", retry_skill_failures=True)
    assert len(rec.requests) == 3 and rec.keys == ["mine"] * 3
    assert info.value.idempotency_key == "mine"


@pytest.mark.parametrize("status", [400, 401, 402, 404, 422])
def test_never_retries_client_errors(status: int) -> None:
    rec = Recorder(fail(status), ok())
    with pytest.raises(SkillGatewayError):
        sync_client(rec, max_retries=5).call("echo", {})
    assert len(rec.requests) == 1


def test_retries_a_409_for_a_key_in_use_only() -> None:
    rec = Recorder(fail(409, "in use", "idempotency_key_in_use"), ok())
    sync_client(rec).call("echo", {})
    assert len(rec.requests) == 2
    rec = Recorder(fail(409, "other", "something_else"), ok())
    with pytest.raises(ConflictError):
        sync_client(rec).call("echo", {})
    assert len(rec.requests) == 1


def test_429_waits_for_retry_after() -> None:
    rec = Recorder(fail(429, "slow down", "rate_limited", {"retry-after": "3"}), ok("done"))
    client = sync_client(rec)
    assert client.call("echo", {}).data == "done"
    assert client._sleeps == [3.0]  # type: ignore[attr-defined]
    assert len(set(rec.keys)) == 1 and len(rec.keys) == 2


def test_429_error_carries_retry_after() -> None:
    rec = Recorder(fail(429, "slow down", "rate_limited", {"retry-after": "2"}))
    with pytest.raises(RateLimitError) as info:
        sync_client(rec, max_retries=0).call("echo", {})
    assert info.value.retry_after == 2.0 and info.value.status_code == 429


def test_429_with_a_far_retry_after_is_raised_at_once() -> None:
    rec = Recorder(fail(429, "daily cap", "daily_limit", {"retry-after": "36000"}), ok())
    client = sync_client(rec)
    with pytest.raises(RateLimitError) as info:
        client.call("echo", {})
    assert info.value.retry_after == 36000.0 and len(rec.requests) == 1 and client._sleeps == []  # type: ignore[attr-defined]


def test_429_without_retry_after_backs_off() -> None:
    rec = Recorder(fail(429), ok())
    client = sync_client(rec)
    client._initial_retry_delay = 0.5
    client._random = lambda: 1.0
    client.call("echo", {})
    assert client._sleeps == [0.5]  # type: ignore[attr-defined]


def test_backoff_is_exponential_capped_and_jittered() -> None:
    client = SkillGateway(max_retries=10)
    client._random = lambda: 0.0
    assert [client._backoff(i) for i in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    client._random = lambda: 0.999
    assert all(client._backoff(i) <= 8.0 for i in range(10))


def test_parse_retry_after() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after(" 7 ") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None


def test_connection_errors_are_retried_then_raised() -> None:
    rec = Recorder(httpx.ConnectError("refused"))
    with pytest.raises(APIConnectionError) as info:
        sync_client(rec).call("echo", {}, idempotency_key="k")
    assert not isinstance(info.value, APITimeoutError)
    assert info.value.status_code is None and info.value.code == "connection_error"
    assert len(rec.requests) == 3 and rec.keys == ["k"] * 3
    assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_timeouts_are_retried_under_one_key_then_raised() -> None:
    rec = Recorder(httpx.ReadTimeout("slow"), httpx.ReadTimeout("slow"), ok("late"))
    assert sync_client(rec).call("echo", {}).data == "late"
    assert len(set(rec.keys)) == 1 and len(rec.keys) == 3
    rec = Recorder(httpx.ConnectTimeout("slow"))
    with pytest.raises(APITimeoutError) as info:
        sync_client(rec, max_retries=1).call("echo", {})
    assert info.value.code == "timeout" and len(rec.requests) == 2


def test_per_call_timeout_reaches_httpx() -> None:
    seen: List[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions.get("timeout"))
        return ok()

    client = sync_client(handler, timeout=30.0)
    client.call("echo", {})
    client.call("echo", {}, timeout=1.5)
    assert seen[0]["read"] == 30.0 and seen[1]["read"] == 1.5


# -- reads -----------------------------------------------------------------------------------

SKILL = {
    "id": "7c0e",
    "slug": "uppercase",
    "name": "Uppercase",
    "description": "Upper-cases text.",
    "price": 0.002,
    "price_per_call": 0.0022,
    "currency": "USD",
    "rate_limit_per_min": None,
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "seller": {"name": "S", "address": None},
}


def test_skills_list_get_and_tool_schemas() -> None:
    rec = Recorder(ok([SKILL]), ok(SKILL))
    client = sync_client(rec)
    skills = client.skills.list()
    assert [s.slug for s in skills] == ["uppercase"] and skills[0].price_per_call == Decimal("0.0022")
    skill = client.skills.get("uppercase")
    assert str(rec.requests[1].url) == "http://gw.test/v1/skills/uppercase"
    assert rec.requests[0].method == "GET" and "idempotency-key" not in rec.requests[0].headers
    openai = skill.as_tool_schema()
    assert openai == {
        "type": "function",
        "function": {"name": "uppercase", "description": "Upper-cases text. Costs $0.0022 per call.", "parameters": SKILL["input_schema"]},
    }
    anthropic = skill.as_tool_schema("anthropic")
    assert anthropic == {"name": "uppercase", "description": "Upper-cases text. Costs $0.0022 per call.", "input_schema": SKILL["input_schema"]}
    with pytest.raises(ValueError):
        skill.as_tool_schema("gemini")


def test_tool_schema_without_input_schema_is_an_open_object() -> None:
    skill = skill_gateway.Skill.parse({**SKILL, "slug": "my.skill", "input_schema": None, "description": ""})
    tool = skill.as_tool_schema("anthropic")
    assert tool["name"] == "my_skill" and tool["input_schema"] == {"type": "object", "properties": {}}
    assert tool["description"].startswith("The Uppercase skill.")


def test_a_usage_priced_skill_costs_up_to_its_most_per_call() -> None:
    raw = {k: v for k, v in SKILL.items() if k != "price"}
    skill = skill_gateway.Skill.parse({**raw, "pricing": "usage", "max_price": 0.01, "price_per_call": 0.011})
    assert skill.pricing == "usage" and skill.max_price == Decimal("0.01") and skill.price == Decimal("0.01")
    assert skill.tool_description == "Upper-cases text. Costs up to $0.011 per call."
    fixed = skill_gateway.Skill.parse(SKILL)
    assert fixed.pricing == "fixed" and fixed.max_price is None


def test_a_skill_carries_its_measured_quality_or_none() -> None:
    quality = {"calls_7d": 1250, "success_rate_7d": 0.992, "p50_ms_7d": 125, "p95_ms_7d": 400}
    skill = skill_gateway.Skill.parse({**SKILL, "quality": quality})
    assert skill.quality == skill_gateway.SkillQuality(calls_7d=1250, success_rate_7d=0.992, p50_ms_7d=125.0, p95_ms_7d=400.0)
    assert skill.tool_description.endswith("per call. Succeeded 99.2% of 1,250 calls this week, p95 400 ms.")
    assert "Succeeded" not in skill_gateway.Skill.parse(SKILL).tool_description
    assert skill_gateway.Skill.parse({**SKILL, "quality": None}).quality is None
    assert skill_gateway.Skill.parse(SKILL).quality is None
    assert skill_gateway.Skill.parse({**SKILL, "quality": {"calls_7d": "many"}}).quality is None


def test_balance_is_exact() -> None:
    rec = Recorder(ok({"currency": "USD", "available": 9.999, "held": 0, "available_base_units": "9999000", "held_base_units": "0"}))
    balance = sync_client(rec).balance()
    assert balance.available == Decimal("9.999") and balance.held == Decimal(0)


def usage_pages() -> Recorder:
    def call(i: int) -> Dict[str, Any]:
        return {"id": f"c{i}", "skill_id": "echo", "status": "success", "http_status": 200, "cost": 0.001, "cost_base_units": "1000", "response_time_ms": 3, "created_at": "t"}

    return Recorder(
        ok({"calls": [call(1), call(2)], "next_before": 200}),
        ok({"calls": [call(3), call(4)], "next_before": 100}),
        ok({"calls": [call(5)], "next_before": None}),
    )


def test_usage_iterates_every_page() -> None:
    rec = usage_pages()
    client = sync_client(rec)
    page = client.usage(limit=2)
    assert [c.id for c in page.calls] == ["c1", "c2"] and page.has_next_page()
    assert [c.id for c in page] == ["c1", "c2", "c3", "c4", "c5"]
    assert [str(r.url) for r in rec.requests] == [
        "http://gw.test/v1/usage?limit=2",
        "http://gw.test/v1/usage?limit=2&before=200",
        "http://gw.test/v1/usage?limit=2&before=100",
    ]
    assert page.calls[0].cost == Decimal("0.001")


# -- async -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_async_call_and_handle() -> None:
    rec = Recorder(ok(1, {"skill_id": "echo", "price_paid": 0.001, "response_time_ms": 1}), ok(2, {"skillId": "echo", "cost": 0.001, "responseTime": 1}))
    async with async_client(rec) as client:
        a = await client.call("echo", {"x": 1})
        b = await client.skill("echo").call(x=1)
    assert (a.data, b.data) == (1, 2)
    assert a.metadata.cost == b.metadata.cost == Decimal("0.001")
    assert json.loads(rec.requests[1].content) == {"x": 1}


@pytest.mark.asyncio
async def test_async_retries_under_one_key_and_honours_retry_after() -> None:
    rec = Recorder(fail(429, headers={"retry-after": "1"}), httpx.ConnectError("reset"), fail(502), ok("ok"))
    client = async_client(rec, max_retries=3, retry_skill_failures=True)
    assert (await client.call("echo", {})).data == "ok"
    assert len(rec.requests) == 4 and len(set(rec.keys)) == 1
    assert client._sleeps[0] == 1.0  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_async_does_not_retry_a_skill_failure_by_default() -> None:
    rec = Recorder(fail(502, "x", "skill_timeout"), ok("ok"))
    with pytest.raises(SkillError):
        await async_client(rec, max_retries=3).call("echo", {})
    assert len(rec.requests) == 1
    rec = Recorder(fail(502, "x", "skill_timeout"), ok("ok"))
    assert (await async_client(rec).skill("echo").call(retry_skill_failures=True)).data == "ok"
    assert len(rec.requests) == 2


@pytest.mark.asyncio
async def test_async_errors() -> None:
    client = async_client(Recorder(fail(402, "insufficient", "insufficient_balance")), max_retries=3)
    with pytest.raises(InsufficientBalanceError) as info:
        await client.call("echo", {})
    assert info.value.code == "insufficient_balance"
    client = async_client(Recorder(httpx.ReadTimeout("slow")), max_retries=0)
    with pytest.raises(APITimeoutError):
        await client.call("echo", {})


@pytest.mark.asyncio
async def test_async_usage_await_and_iterate() -> None:
    client = async_client(usage_pages())
    page = await client.usage(limit=2)
    assert [c.id for c in page.calls] == ["c1", "c2"]
    assert [c.id async for c in page] == ["c1", "c2", "c3", "c4", "c5"]
    client = async_client(usage_pages())
    assert [c.id async for c in client.usage(limit=2)] == ["c1", "c2", "c3", "c4", "c5"]


@pytest.mark.asyncio
async def test_async_reads() -> None:
    client = async_client(Recorder(ok([SKILL]), ok(SKILL), ok({"available_base_units": "5", "held_base_units": "0"})))
    assert [s.slug for s in await client.skills.list()] == ["uppercase"]
    assert (await client.skill("uppercase").as_tool_schema("anthropic"))["name"] == "uppercase"
    assert (await client.balance()).available == Decimal("0.000005")


def test_client_owned_pool_is_closed_but_a_given_one_is_not() -> None:
    given = httpx.Client(transport=httpx.MockTransport(Recorder(ok())))
    with SkillGateway(http_client=given):
        pass
    assert not given.is_closed
    with SkillGateway() as own:
        pass
    assert own._client.is_closed
