"""What the client returns: plain dataclasses over the gateway's JSON, amounts as ``Decimal``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional

import httpx

__all__ = ["CallMetadata", "CallResult", "RateLimitInfo", "Skill", "Balance", "UsageCall", "KeyStatus"]

_MICROS = Decimal(1_000_000)


def to_decimal(value: Any) -> Decimal:
    """A JSON number as the Decimal it reads as (0.001, not 0.001000000000000000020816...)."""
    if value is None or isinstance(value, bool):
        return Decimal(0)
    if isinstance(value, Decimal):
        return value
    try:
        return Decimal(str(value))
    except Exception:
        return Decimal(0)


def _micros(base_units: Any, fallback: Any) -> Decimal:
    """USD from USDC base units (6 decimals, a string), exact; else from the USD number."""
    if isinstance(base_units, (str, int)) and not isinstance(base_units, bool):
        try:
            return Decimal(int(base_units)) / _MICROS
        except ValueError:
            pass
    return to_decimal(fallback)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


@dataclass(frozen=True)
class RateLimitInfo:
    """The per-key rate limit from the ``RateLimit-*`` headers."""

    limit: int
    """Calls allowed per window (RateLimit-Limit)."""
    remaining: int
    """Calls left in this window (RateLimit-Remaining)."""
    reset: float
    """Seconds until the window resets (RateLimit-Reset)."""

    @classmethod
    def from_headers(cls, headers: httpx.Headers) -> Optional["RateLimitInfo"]:
        limit, remaining, reset = (headers.get(f"ratelimit-{n}") for n in ("limit", "remaining", "reset"))
        if limit is None or remaining is None or reset is None:
            return None
        try:
            return cls(limit=int(limit), remaining=int(remaining), reset=float(reset))
        except ValueError:
            return None


@dataclass(frozen=True)
class CallMetadata:
    """A call's metadata, the same whichever endpoint answered: snake_case ``skill_id``,
    ``price_paid``, ``response_time_ms`` from ``/v1/call``, camelCase ``skillId``, ``cost``,
    ``responseTime`` from ``/v1/skills/:id/call``, plus what the headers say."""

    skill_id: str
    cost: Decimal
    """What the call cost in USD; 0 when it was not charged."""
    response_time_ms: float
    idempotency_key: str
    """The Idempotency-Key the call was sent with."""
    call_id: Optional[str] = None
    """The call's id (the metadata's ``call_id``, or the X-Call-Id header); an idempotent replay names the
    call it replays."""
    replayed: bool = False
    """True when the gateway answered with the stored response of an earlier attempt."""
    rate_limit: Optional[RateLimitInfo] = None
    balance_available: Optional[Decimal] = None
    """The account's available balance after this call's charge, in USD (X-Balance-Available); None
    when the call charged nothing (a free skill, an idempotent replay)."""
    key_spend_remaining: Optional[Decimal] = None
    """What the key may still spend in its current period after this call's charge, in USD
    (X-Key-Spend-Remaining); None for a key without a spending limit."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The metadata object as the gateway sent it."""

    @property
    def rate_limit_limit(self) -> Optional[int]:
        return self.rate_limit.limit if self.rate_limit else None

    @property
    def rate_limit_remaining(self) -> Optional[int]:
        return self.rate_limit.remaining if self.rate_limit else None

    @property
    def rate_limit_reset(self) -> Optional[float]:
        return self.rate_limit.reset if self.rate_limit else None

    @classmethod
    def parse(cls, raw: Any, headers: httpx.Headers, idempotency_key: str) -> "CallMetadata":
        m: Dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}

        def first(*names: str) -> Any:
            for name in names:
                if m.get(name) is not None:
                    return m[name]
            return None

        return cls(
            skill_id=str(first("skill_id", "skillId") or ""),
            cost=to_decimal(first("price_paid", "cost")),
            response_time_ms=_number(first("response_time_ms", "responseTime")),
            idempotency_key=idempotency_key,
            # In the body since the call id joined the metadata (call_id, callId); the header as before.
            call_id=(str(first("call_id", "callId")) if first("call_id", "callId") is not None else None) or headers.get("x-call-id"),
            replayed=headers.get("idempotent-replayed") == "true",
            rate_limit=RateLimitInfo.from_headers(headers),
            balance_available=_usd_header(headers.get("x-balance-available")),
            key_spend_remaining=_usd_header(headers.get("x-key-spend-remaining")),
            raw=m,
        )


_USD_TEXT = re.compile(r"^\d+(\.\d+)?$")


def _usd_header(value: Optional[str]) -> Optional[Decimal]:
    """A USD decimal string header, exact; None when absent or not one."""
    return Decimal(value) if value is not None and _USD_TEXT.match(value) else None


@dataclass(frozen=True)
class CallResult:
    """A successful call: the skill's ``data`` and the call's ``metadata``."""

    data: Any
    metadata: CallMetadata


_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
OPEN_SCHEMA: Dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class SkillQuality:
    """What the gateway measured of a skill's calls over the last 7 days (docs/selling.md, Quality).

    ``calls_7d`` counts the calls the skill is judged on (its successes and its own failures);
    ``success_rate_7d`` is successes over those, 0 to 1, rounded down to 4 decimals; half (p50) and 95% (p95)
    of them answered within ``p50_ms_7d`` and ``p95_ms_7d`` milliseconds."""

    calls_7d: int
    success_rate_7d: float
    p50_ms_7d: float
    p95_ms_7d: float

    @classmethod
    def parse(cls, raw: Any) -> Optional["SkillQuality"]:
        """The figures of GET /v1/skills's ``quality``; None for null (too few calls to say) or anything else."""
        if not isinstance(raw, Mapping):
            return None
        try:
            return cls(
                calls_7d=int(raw["calls_7d"]),
                success_rate_7d=float(raw["success_rate_7d"]),
                p50_ms_7d=float(raw["p50_ms_7d"]),
                p95_ms_7d=float(raw["p95_ms_7d"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Skill:
    """A marketplace skill (GET /v1/skills). ``price`` is the listed price and
    ``price_per_call`` what a caller pays, in USD. A usage-priced skill (``pricing`` "usage")
    charges what each call used, up to ``max_price``: its ``price`` is then its max_price and
    ``price_per_call`` the most a call costs."""

    id: str
    slug: str
    name: str
    description: str
    price: Decimal
    price_per_call: Decimal
    currency: str = "USD"
    rate_limit_per_min: Optional[int] = None
    input_schema: Optional[Dict[str, Any]] = None
    # The JSON Schema a 2xx answer must match to be charged (docs/selling.md, Output contracts); None: no promise.
    output_schema: Optional[Dict[str, Any]] = None
    seller: Dict[str, Any] = field(default_factory=dict)
    # "fixed", or "usage": charged what each call used, up to max_price (issue 27).
    pricing: str = "fixed"
    max_price: Optional[Decimal] = None
    # The gateway's measure of the skill this week; None while it has too few calls to say (or says nothing).
    quality: Optional[SkillQuality] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "Skill":
        schema = raw.get("input_schema")
        output = raw.get("output_schema")
        return cls(
            id=str(raw.get("id") or ""),
            slug=str(raw.get("slug") or raw.get("id") or ""),
            name=str(raw.get("name") or raw.get("slug") or ""),
            description=str(raw.get("description") or ""),
            price=to_decimal(raw.get("price", raw.get("max_price"))),
            price_per_call=to_decimal(raw.get("price_per_call", raw.get("price"))),
            currency=str(raw.get("currency") or "USD"),
            rate_limit_per_min=raw.get("rate_limit_per_min"),
            input_schema=schema if isinstance(schema, dict) else None,
            output_schema=output if isinstance(output, dict) else None,
            seller=dict(raw.get("seller") or {}),
            pricing=str(raw.get("pricing") or "fixed"),
            max_price=to_decimal(raw["max_price"]) if raw.get("max_price") is not None else None,
            quality=SkillQuality.parse(raw.get("quality")),
            raw=dict(raw),
        )

    @property
    def tool_name(self) -> str:
        """The slug as a tool name models accept (``^[a-zA-Z0-9_-]{1,64}$``)."""
        return (_TOOL_NAME.sub("_", self.slug) or "skill")[:64]

    @property
    def tool_description(self) -> str:
        """The skill's description, with its price per call and, when the gateway measured it, its quality."""
        from ._tool_text import quality_line  # the sentences live there; it imports this module

        base = self.description.strip() or f"The {self.name or self.slug} skill."
        up_to = "up to " if self.pricing == "usage" else ""
        price = f"{base} Costs {up_to}${self.price_per_call.normalize():f} per call."
        return price if self.quality is None else f"{price} {quality_line(self.quality)}"

    def as_tool_schema(self, format: str = "openai") -> Dict[str, Any]:
        """A tool definition to hand to a model, from the skill's JSON Schema (an open object
        when it has none).

        ``format="openai"`` (default): ``{"type": "function", "function": {"name", "description",
        "parameters"}}`` for Chat Completions ``tools``. ``format="anthropic"``: ``{"name",
        "description", "input_schema"}`` for the Messages API ``tools``. The name is the slug:
        call the skill back with ``client.skill(name).call(arguments)``.
        """
        schema = dict(self.input_schema) if self.input_schema else dict(OPEN_SCHEMA)
        if format == "openai":
            return {"type": "function", "function": {"name": self.tool_name, "description": self.tool_description, "parameters": schema}}
        if format == "anthropic":
            return {"name": self.tool_name, "description": self.tool_description, "input_schema": schema}
        raise ValueError(f'format must be "openai" or "anthropic", not {format!r}')


@dataclass(frozen=True)
class Balance:
    """GET /v1/balance, in USD (exact, from the USDC base units)."""

    currency: str
    available: Decimal
    held: Decimal
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "Balance":
        return cls(
            currency=str(raw.get("currency") or "USD"),
            available=_micros(raw.get("available_base_units"), raw.get("available")),
            held=_micros(raw.get("held_base_units"), raw.get("held")),
            raw=dict(raw),
        )


@dataclass(frozen=True)
class UsageCall:
    """One call of GET /v1/usage (the API's field names), ``cost`` in USD."""

    id: str
    skill_id: str
    status: str
    http_status: int
    cost: Decimal
    response_time_ms: float
    created_at: str
    outcome: str = ""
    endpoint: str = ""
    api_key_id: str = ""
    """The key the call was made with (``x402`` for a call paid with x402)."""
    api_key_name: Optional[str] = None
    api_key_metadata: Optional[Dict[str, str]] = None
    """The key's metadata as it is now (which agent, which end user it is for); None without a key."""
    skill_uuid: Optional[str] = None
    skill_name: Optional[str] = None
    batch_number: Optional[int] = None
    settlement: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "UsageCall":
        return cls(
            id=str(raw.get("id") or ""),
            skill_id=str(raw.get("skill_id") or ""),
            status=str(raw.get("status") or ""),
            http_status=int(raw.get("http_status") or 0),
            cost=_micros(raw.get("cost_base_units"), raw.get("cost")),
            response_time_ms=_number(raw.get("response_time_ms")),
            created_at=str(raw.get("created_at") or ""),
            outcome=str(raw.get("outcome") or ""),
            endpoint=str(raw.get("endpoint") or ""),
            api_key_id=str(raw.get("api_key_id") or ""),
            api_key_name=raw.get("api_key_name"),
            api_key_metadata=dict(raw.get("api_key_metadata") or {}) if isinstance(raw.get("api_key_metadata"), Mapping) else None,
            skill_uuid=raw.get("skill_uuid"),
            skill_name=raw.get("skill_name"),
            batch_number=raw.get("batch_number"),
            settlement=raw.get("settlement"),
            raw=dict(raw),
        )


@dataclass(frozen=True)
class KeyStatus:
    """GET /v1/key: the calling key's own record (the API's field names, as GET /v1/keys lists a key)
    and its budget. Amounts in USD, exact (from the USDC base units); the limit's fields are None
    for a key without a spending limit."""

    id: str
    prefix: str
    name: str
    scopes: List[str]
    available_usd: Decimal
    """The account's available balance."""
    allowed_skills: Optional[List[str]] = None
    """The skills the key may call (slugs or UUIDs); None: every skill."""
    expires_at: Optional[str] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    """What the key's owner noted on it (which agent, which end user); {} for none."""
    created_at: Optional[str] = None
    last_used_at: Optional[str] = None
    spend_limit_usd: Optional[Decimal] = None
    spend_limit_period: Optional[str] = None
    spent_usd: Optional[Decimal] = None
    """What the current period has spent, calls in flight included."""
    remaining_usd: Optional[Decimal] = None
    """What the key may still spend in its current period (never below 0)."""
    resets_at: Optional[str] = None
    """When the current period's count starts again; None for ``total``, or without a limit."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "KeyStatus":
        def limit_field(name: str) -> Optional[Decimal]:
            return None if raw.get(f"{name}_usd") is None else _micros(raw.get(f"{name}_base_units"), raw.get(f"{name}_usd"))

        allowed = raw.get("allowed_skills")
        metadata = raw.get("metadata")
        return cls(
            id=str(raw.get("id") or ""),
            prefix=str(raw.get("prefix") or ""),
            name=str(raw.get("name") or ""),
            scopes=[str(s) for s in raw.get("scopes") or []],
            available_usd=_micros(raw.get("available_base_units"), raw.get("available_usd")),
            allowed_skills=[str(s) for s in allowed] if isinstance(allowed, list) else None,
            expires_at=raw.get("expires_at"),
            metadata={str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {},
            created_at=raw.get("created_at"),
            last_used_at=raw.get("last_used_at"),
            spend_limit_usd=limit_field("spend_limit"),
            spend_limit_period=raw.get("spend_limit_period"),
            spent_usd=limit_field("spent"),
            remaining_usd=limit_field("remaining"),
            resets_at=raw.get("resets_at"),
            raw=dict(raw),
        )


def parse_usage_page(data: Any) -> "tuple[List[UsageCall], Optional[int]]":
    data = data if isinstance(data, Mapping) else {}
    calls = [UsageCall.parse(c) for c in data.get("calls") or [] if isinstance(c, Mapping)]
    nxt = data.get("next_before")
    return calls, (int(nxt) if nxt is not None else None)
