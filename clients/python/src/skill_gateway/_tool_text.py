"""The words a model reads about a call, and tool results in the formats the client already describes
(``Skill.as_tool_schema``): OpenAI's Chat Completions ``role: "tool"`` message and Anthropic's Messages
``tool_result`` block. The sentences are the hosted MCP server's (server/http/tool-text.ts) and the
TypeScript SDK's (clients/typescript/src/tool-text.ts): one per outcome, what was charged, what to do next
(docs/clients.md, "One contract")."""

import json
import math
import re
from decimal import Decimal
from typing import Any, Dict, Optional, Union

from ._exceptions import RateLimitError, SkillGatewayError
from ._types import CallMetadata, CallResult, SkillQuality

__all__ = ["cost_line", "failure_line", "failure_text", "quality_line", "tool_result_text", "tool_result"]

# What to do next after a failure of each code, when the gateway's own message does not say it.
_NEXT_STEP: Dict[str, str] = {
    "invalid_input": "Fix the arguments and call again.",
    "skill_rejected_input": "Fix the arguments and call again.",
    "invalid_request": "Fix the arguments and call again.",
    "key_spend_limit_reached": "Paid calls with this API key are refused until the limit allows them.",
    "skill_not_allowed": "Do without it, or use a key allowed to call it.",
    "skill_error": "You may retry, or do without it.",
    "skill_timeout": "You may retry, or do without it.",
    "skill_unreachable": "You may retry, or do without it.",
    "skill_invalid_response": "You may retry, or do without it.",
    "skill_backend_forbidden": "Do without it.",
}
_UNCHARGED = re.compile(r"not charged|nothing was charged", re.IGNORECASE)


def _usd(amount: Decimal) -> str:
    """A USD amount as the gateway's metadata writes it: ``$0.001``, ``$0``."""
    text = f"{amount.normalize():f}"
    return f"${text}"


def _one_line(text: str) -> str:
    flat = re.sub(r"\s*\n\s*", " ", text).strip()
    return flat if flat == "" or flat[-1] in ".!?" else f"{flat}."


def _count(n: float) -> str:
    """A whole count with thousands separators: ``1,250``."""
    return f"{math.trunc(n):,}"


def quality_line(quality: Optional[SkillQuality]) -> str:
    """What a tool description says of a skill's measured quality: ``Succeeded 99.2% of 1,250 calls this week,
    p95 340 ms.``, the rate rounded down to a tenth of a percent (never better than measured); without figures
    (too few calls to say), ``Too few calls this week to measure its success rate.``"""
    if quality is None:
        return "Too few calls this week to measure its success rate."
    # As the TypeScript SDK does it: to 4 decimals (half up), then down to a tenth of a percent.
    tenths = math.floor(math.floor(quality.success_rate_7d * 10_000 + 0.5) / 10)
    rate = f"{tenths // 10}" + ("" if tenths % 10 == 0 else f".{tenths % 10}")
    calls = f"{_count(quality.calls_7d)} call{'' if quality.calls_7d == 1 else 's'}"
    p95 = quality.p95_ms_7d
    p95_text = _count(p95) if float(p95).is_integer() else repr(float(p95))
    return f"Succeeded {rate}% of {calls} this week, p95 {p95_text} ms."


def cost_line(metadata: CallMetadata) -> str:
    """The line after a successful call's data: ``Charged $0.001 for echo (call <id>).``; for an
    idempotent replay, which charged nothing new, ``Already paid: $0.001 for echo (call <id>, replayed).``"""
    skill = metadata.skill_id or "the skill"
    usd = _usd(metadata.cost)
    if metadata.replayed:
        return f"Already paid: {usd} for {skill} ({'call ' + metadata.call_id + ', ' if metadata.call_id else ''}replayed)."
    return f"Charged {usd} for {skill}{' (call ' + metadata.call_id + ')' if metadata.call_id else ''}."


def failure_line(message: str, code: Optional[str] = None, retry_after_sec: Optional[float] = None) -> str:
    """A failed call's text, one line: the gateway's message, then "Nothing was charged." unless the
    message says so already, then what to do next when the message does not say it."""
    said = _one_line(message)
    charged = "" if _UNCHARGED.search(said) else " Nothing was charged."
    if code in ("rate_limited", "daily_limit_reached"):
        step: Optional[str] = f"Retry after {int(-(-retry_after_sec // 1))} s." if retry_after_sec is not None else "Retry later."
    else:
        step = _NEXT_STEP.get(code or "")
    return f"{said}{charged}{' ' + step if step else ''}"


def failure_text(error: BaseException) -> str:
    """The text for any error a call raised. Without an answer (a time-out, a lost connection) the
    gateway may have charged the call: that is said, with the safe retry."""
    if not isinstance(error, SkillGatewayError):
        return _one_line(str(error))
    if error.status_code is None:
        return (
            f"{_one_line(error.message)} No answer came, so the call may have been charged; "
            "a retry with the same Idempotency-Key is charged at most once."
        )
    retry_after = error.retry_after if isinstance(error, RateLimitError) else None
    return failure_line(error.message, error.code, retry_after)


def tool_result_text(outcome: Union[CallResult, BaseException]) -> str:
    """What the model reads: a result's data as JSON and its cost line, or an error's one line."""
    if isinstance(outcome, CallResult):
        return f"{json.dumps(outcome.data, ensure_ascii=False, default=str)}\n{cost_line(outcome.metadata)}"
    return failure_text(outcome)


def tool_result(outcome: Union[CallResult, BaseException], tool_call_id: str, format: str = "openai") -> Dict[str, Any]:
    """A call's outcome as the tool result a model expects back, for the tool call ``tool_call_id``.

    ``format="openai"`` (default): ``{"role": "tool", "tool_call_id", "content"}``, a Chat Completions
    message. ``format="anthropic"``: ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``,
    a block of a Messages API ``user`` message.
    """
    text = tool_result_text(outcome)
    if format == "openai":
        return {"role": "tool", "tool_call_id": tool_call_id, "content": text}
    if format == "anthropic":
        return {"type": "tool_result", "tool_use_id": tool_call_id, "content": text, "is_error": not isinstance(outcome, CallResult)}
    raise ValueError(f'format must be "openai" or "anthropic", not {format!r}')
