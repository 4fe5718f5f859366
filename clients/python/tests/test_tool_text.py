"""The words a model reads about a call, and the OpenAI / Anthropic tool results built from them: the same
sentences as the hosted MCP server's and the TypeScript SDK's (clients/typescript/test/tool-text.test.ts
holds the same cases)."""

from decimal import Decimal

import httpx
import pytest

from skill_gateway import (
    APITimeoutError,
    BadRequestError,
    CallMetadata,
    CallResult,
    InsufficientBalanceError,
    KeySpendLimitReachedError,
    NotFoundError,
    PriceAboveMaxError,
    RateLimitError,
    SkillError,
    SkillGatewayError,
    SkillQuality,
    cost_line,
    failure_text,
    quality_line,
    tool_result,
    tool_result_text,
)

META = CallMetadata(skill_id="echo", cost=Decimal("0.001"), response_time_ms=1.5, idempotency_key="k-1", call_id="c-1")


def test_success_says_what_was_charged_for_which_skill_and_call() -> None:
    assert cost_line(META) == "Charged $0.001 for echo (call c-1)."


def test_a_replay_says_already_paid_never_charged() -> None:
    replayed = CallMetadata(skill_id="echo", cost=Decimal("0.001"), response_time_ms=1.5, idempotency_key="k-1", call_id="c-1", replayed=True)
    assert cost_line(replayed) == "Already paid: $0.001 for echo (call c-1, replayed)."


CASES = [
    (
        "402 balance",
        InsufficientBalanceError("Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds.", status_code=402, code="insufficient_balance"),
        "Insufficient balance: this call costs $0.001 and $0.00 is available. Add funds. Nothing was charged.",
    ),
    (
        "402 key limit",
        KeySpendLimitReachedError(
            "This key's spending limit of $1.00 per day is reached ($1.00 spent); it resets at 2026-01-02T00:00:00Z.",
            status_code=402,
            code="key_spend_limit_reached",
        ),
        "This key's spending limit of $1.00 per day is reached ($1.00 spent); it resets at 2026-01-02T00:00:00Z. Nothing was charged. "
        "Paid calls with this API key are refused until the limit allows them.",
    ),
    (
        "409 price cap",
        PriceAboveMaxError(
            'The skill "echo" costs $0.002 per call, above this call\'s max_price of $0.001: nothing was charged. Accept the new price with a max_price of at least $0.002.',
            status_code=409,
            code="price_above_max",
        ),
        'The skill "echo" costs $0.002 per call, above this call\'s max_price of $0.001: nothing was charged. Accept the new price with a max_price of at least $0.002.',
    ),
    (
        "403",
        SkillGatewayError('This API key may not call the skill "echo": it is not in the key\'s allowed_skills.', status_code=403, code="skill_not_allowed"),
        'This API key may not call the skill "echo": it is not in the key\'s allowed_skills. Nothing was charged. Do without it, or use a key allowed to call it.',
    ),
    (
        "404",
        NotFoundError('Skill not found: "ech". Check the skill_id slug or UUID.', status_code=404, code="skill_not_found"),
        'Skill not found: "ech". Check the skill_id slug or UUID. Nothing was charged.',
    ),
    (
        "429",
        RateLimitError("Rate limit exceeded: 100 calls per minute for this API key.", status_code=429, code="rate_limited", retry_after=6.5),
        "Rate limit exceeded: 100 calls per minute for this API key. Nothing was charged. Retry after 7 s.",
    ),
    (
        "502",
        SkillError("Skill error: skill backend answered HTTP 503. You were not charged.", status_code=502, code="skill_error"),
        "Skill error: skill backend answered HTTP 503. You were not charged. You may retry, or do without it.",
    ),
    (
        "502 timeout",
        SkillError("Skill error: skill backend timed out after 30000 ms. You were not charged.", status_code=502, code="skill_timeout"),
        "Skill error: skill backend timed out after 30000 ms. You were not charged. You may retry, or do without it.",
    ),
    (
        "no answer (the client's time-out)",
        APITimeoutError("No answer within 60000 ms."),
        "No answer within 60000 ms. No answer came, so the call may have been charged; a retry with the same Idempotency-Key is charged at most once.",
    ),
    (
        "400 bad argument",
        BadRequestError("Input does not match the skill's schema: /text must be string", status_code=400, code="invalid_input"),
        "Input does not match the skill's schema: /text must be string. Nothing was charged. Fix the arguments and call again.",
    ),
]


@pytest.mark.parametrize("outcome,error,text", CASES, ids=[case[0] for case in CASES])
def test_one_line_per_failure_the_charge_said_once_and_what_to_do_next(outcome: str, error: Exception, text: str) -> None:
    assert failure_text(error) == text


def test_tool_results_for_openai_and_anthropic() -> None:
    result = CallResult(data={"text": "HI"}, metadata=META)
    assert tool_result_text(result) == '{"text": "HI"}\nCharged $0.001 for echo (call c-1).'
    assert tool_result(result, "call_1") == {"role": "tool", "tool_call_id": "call_1", "content": '{"text": "HI"}\nCharged $0.001 for echo (call c-1).'}
    refused = NotFoundError('Skill not found: "ech". Check the skill_id slug or UUID.', status_code=404, code="skill_not_found")
    assert tool_result(refused, "toolu_1", format="anthropic") == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": 'Skill not found: "ech". Check the skill_id slug or UUID. Nothing was charged.',
        "is_error": True,
    }
    assert tool_result(result, "toolu_2", format="anthropic")["is_error"] is False
    with pytest.raises(ValueError):
        tool_result(result, "x", format="gemini")


def test_the_call_id_comes_from_the_body_and_else_the_header() -> None:
    headers = httpx.Headers({"x-call-id": "from-header"})
    assert CallMetadata.parse({"skill_id": "echo", "price_paid": 0.001, "call_id": "from-body"}, headers, "k").call_id == "from-body"
    assert CallMetadata.parse({"skillId": "echo", "cost": 0.001, "callId": "camel"}, httpx.Headers(), "k").call_id == "camel"
    assert CallMetadata.parse({"skill_id": "echo", "price_paid": 0.001}, headers, "k").call_id == "from-header"


def test_quality_line_says_what_the_typescript_sdk_says() -> None:
    # The cases of test/http/tool-text.test.ts, word for word.
    assert (
        quality_line(SkillQuality(calls_7d=1250, success_rate_7d=0.9925, p50_ms_7d=125, p95_ms_7d=400))
        == "Succeeded 99.2% of 1,250 calls this week, p95 400 ms."
    )
    assert (
        quality_line(SkillQuality(calls_7d=20, success_rate_7d=1, p50_ms_7d=1, p95_ms_7d=2.5))
        == "Succeeded 100% of 20 calls this week, p95 2.5 ms."
    )
    assert (
        quality_line(SkillQuality(calls_7d=1_000_000, success_rate_7d=0.5, p50_ms_7d=100, p95_ms_7d=12_500))
        == "Succeeded 50% of 1,000,000 calls this week, p95 12,500 ms."
    )
    # Rounded down, never up to a better figure than measured.
    assert quality_line(SkillQuality(calls_7d=21, success_rate_7d=0.9999, p50_ms_7d=1, p95_ms_7d=1)).startswith("Succeeded 99.9% ")
    assert quality_line(None) == "Too few calls this week to measure its success rate."
