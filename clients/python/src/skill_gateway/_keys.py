"""Keys made by code: ``client.keys`` (sync) and the async client's, over ``/v1/keys``.

With a key that has the ``keys:manage`` scope, an owner's code makes a key per agent, lists the account's keys,
changes them and revokes them (docs/keys.md in the gateway's repository). Kept in this module of its own, apart from
the call path.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from ._base import TimeoutTypes
from ._types import _micros

if TYPE_CHECKING:
    from ._client import AsyncSkillGateway, SkillGateway

__all__ = ["ApiKey", "CreatedApiKey", "RevokedKey", "Keys", "AsyncKeys", "NOT_GIVEN"]


class _NotGiven:
    """The default of a field left out: unlike ``None``, which the API reads as "none" (no limit, every skill,
    never expires, no metadata)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN: Any = _NotGiven()


def _usd_or_none(base_units: Any, usd: Any) -> Optional[Decimal]:
    return None if usd is None and base_units is None else _micros(base_units, usd)


@dataclass(frozen=True)
class ApiKey:
    """A key as ``GET /v1/keys`` lists it (the API's field names), never its secret. Amounts in USD, exact."""

    id: str
    prefix: str
    name: str
    scopes: List[str]
    created_at: Optional[str] = None
    last_used_at: Optional[str] = None
    spend_limit_usd: Optional[Decimal] = None
    """What the key may spend per period; None without a limit."""
    spend_limit_period: Optional[str] = None
    spent_usd: Optional[Decimal] = None
    """Spent in the current period, calls in flight included; None without a limit."""
    resets_at: Optional[str] = None
    allowed_skills: Optional[List[str]] = None
    """The skills the key may call; None for every skill."""
    expires_at: Optional[str] = None
    """When the key stops authenticating; None for never."""
    metadata: Dict[str, str] = field(default_factory=dict)
    """What its maker says the key is for (which agent, which end user)."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "ApiKey":
        skills = raw.get("allowed_skills")
        metadata = raw.get("metadata")
        return cls(
            id=str(raw.get("id") or ""),
            prefix=str(raw.get("prefix") or ""),
            name=str(raw.get("name") or ""),
            scopes=[str(s) for s in raw.get("scopes") or []],
            created_at=raw.get("created_at"),
            last_used_at=raw.get("last_used_at"),
            spend_limit_usd=_usd_or_none(raw.get("spend_limit_base_units"), raw.get("spend_limit_usd")),
            spend_limit_period=raw.get("spend_limit_period"),
            spent_usd=_usd_or_none(raw.get("spent_base_units"), raw.get("spent_usd")),
            resets_at=raw.get("resets_at"),
            allowed_skills=[str(s) for s in skills] if isinstance(skills, list) else None,
            expires_at=raw.get("expires_at"),
            metadata={str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {},
            raw=dict(raw),
        )


@dataclass(frozen=True)
class CreatedApiKey(ApiKey):
    """A key just made: its listed fields, and ``key``, the whole secret, shown this once (store it now)."""

    key: str = field(default="", repr=False)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> "CreatedApiKey":
        listed = ApiKey.parse(raw)
        return cls(**{f.name: getattr(listed, f.name) for f in dataclasses.fields(ApiKey)}, key=str(raw.get("key") or ""))


@dataclass(frozen=True)
class RevokedKey:
    """``DELETE /v1/keys/:id``'s answer."""

    id: str
    revoked: bool


def _iso(value: Union[_dt.datetime, str]) -> str:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise ValueError("expires_at must be a timezone-aware datetime (or an ISO 8601 string with its offset)")
        return value.isoformat()
    return value


def _usd(value: Union[Decimal, str, int, float]) -> str:
    # Sent as text, so the amount reaches the gateway exactly as written (it refuses more than 6 decimals).
    return value if isinstance(value, str) else str(value)


def key_body(
    name: Any = NOT_GIVEN,
    scopes: Any = NOT_GIVEN,
    allowed_skills: Any = NOT_GIVEN,
    expires_at: Any = NOT_GIVEN,
    spend_limit_usd: Any = NOT_GIVEN,
    spend_limit_period: Any = NOT_GIVEN,
    metadata: Any = NOT_GIVEN,
) -> Dict[str, Any]:
    """The API's body for the fields given: a field left out is not sent, ``None`` is sent as null."""
    body: Dict[str, Any] = {}
    if name is not NOT_GIVEN:
        body["name"] = name
    if scopes is not NOT_GIVEN:
        body["scopes"] = list(scopes)
    if allowed_skills is not NOT_GIVEN:
        body["allowed_skills"] = None if allowed_skills is None else list(allowed_skills)
    if expires_at is not NOT_GIVEN:
        body["expires_at"] = None if expires_at is None else _iso(expires_at)
    if spend_limit_usd is not NOT_GIVEN:
        body["spend_limit_usd"] = None if spend_limit_usd is None else _usd(spend_limit_usd)
    if spend_limit_period is not NOT_GIVEN:
        body["spend_limit_period"] = spend_limit_period
    if metadata is not NOT_GIVEN:
        body["metadata"] = None if metadata is None else dict(metadata)
    return body


def key_path(key_id: str) -> str:
    return f"/v1/keys/{quote(key_id, safe='')}"


_Skills = Optional[Sequence[str]]
_When = Optional[Union[_dt.datetime, str]]
_Usd = Optional[Union[Decimal, str, int, float]]


class Keys:
    """``client.keys``: the account's API keys, from code. The client's key needs ``keys:manage``; such a key makes
    only keys no wider than itself (never ``keys:manage`` or ``funds:withdraw``; within its own skills, expiry and
    spending limit), else ``APIStatusError`` 403 ``authority_exceeded``.

    ``create`` and ``revoke`` are sent once, never retried (a create repeated after a lost answer would make a second
    key: list the keys to see whether the first was made); ``list`` and ``update`` are retried as reads are."""

    def __init__(self, client: "SkillGateway") -> None:
        self._client = client

    def create(
        self,
        name: Optional[str] = None,
        *,
        scopes: Sequence[str] = NOT_GIVEN,
        allowed_skills: _Skills = NOT_GIVEN,
        expires_at: _When = NOT_GIVEN,
        spend_limit_usd: _Usd = NOT_GIVEN,
        spend_limit_period: Optional[str] = NOT_GIVEN,
        metadata: Optional[Mapping[str, str]] = NOT_GIVEN,
        timeout: Optional[TimeoutTypes] = None,
    ) -> CreatedApiKey:
        """``POST /v1/keys``: a new key (``["calls"]`` unless ``scopes`` says otherwise); ``.key`` is its secret."""
        body = key_body(NOT_GIVEN if name is None else name, scopes, allowed_skills, expires_at, spend_limit_usd, spend_limit_period, metadata)
        return CreatedApiKey.parse(self._client._request("POST", "/v1/keys", body, None, timeout, retries=0)[1].get("data") or {})

    def list(self, timeout: Optional[TimeoutTypes] = None) -> List[ApiKey]:
        """``GET /v1/keys``: the account's live keys."""
        return [ApiKey.parse(k) for k in self._client._get("/v1/keys", timeout) or [] if isinstance(k, Mapping)]

    def update(
        self,
        key_id: str,
        *,
        name: str = NOT_GIVEN,
        scopes: Sequence[str] = NOT_GIVEN,
        allowed_skills: _Skills = NOT_GIVEN,
        expires_at: _When = NOT_GIVEN,
        spend_limit_usd: _Usd = NOT_GIVEN,
        spend_limit_period: Optional[str] = NOT_GIVEN,
        metadata: Optional[Mapping[str, str]] = NOT_GIVEN,
        timeout: Optional[TimeoutTypes] = None,
    ) -> ApiKey:
        """``PATCH /v1/keys/:id``: changes the fields given, in one transaction, at the key's next request. ``None``
        removes (the limit, the skill list, the expiry, the metadata); ``metadata`` replaces the whole map."""
        body = key_body(name, scopes, allowed_skills, expires_at, spend_limit_usd, spend_limit_period, metadata)
        return ApiKey.parse(self._client._request("PATCH", key_path(key_id), body, None, timeout)[1].get("data") or {})

    def revoke(self, key_id: str, timeout: Optional[TimeoutTypes] = None) -> RevokedKey:
        """``DELETE /v1/keys/:id``: revoked at once; the key's next request gets 401."""
        data = self._client._request("DELETE", key_path(key_id), None, None, timeout, retries=0)[1].get("data") or {}
        return RevokedKey(id=str(data.get("id") or key_id), revoked=bool(data.get("revoked")))


class AsyncKeys:
    """``client.keys`` of ``AsyncSkillGateway``: the same methods as ``Keys``, awaited."""

    def __init__(self, client: "AsyncSkillGateway") -> None:
        self._client = client

    async def create(
        self,
        name: Optional[str] = None,
        *,
        scopes: Sequence[str] = NOT_GIVEN,
        allowed_skills: _Skills = NOT_GIVEN,
        expires_at: _When = NOT_GIVEN,
        spend_limit_usd: _Usd = NOT_GIVEN,
        spend_limit_period: Optional[str] = NOT_GIVEN,
        metadata: Optional[Mapping[str, str]] = NOT_GIVEN,
        timeout: Optional[TimeoutTypes] = None,
    ) -> CreatedApiKey:
        body = key_body(NOT_GIVEN if name is None else name, scopes, allowed_skills, expires_at, spend_limit_usd, spend_limit_period, metadata)
        return CreatedApiKey.parse((await self._client._request("POST", "/v1/keys", body, None, timeout, retries=0))[1].get("data") or {})

    async def list(self, timeout: Optional[TimeoutTypes] = None) -> List[ApiKey]:
        return [ApiKey.parse(k) for k in await self._client._get("/v1/keys", timeout) or [] if isinstance(k, Mapping)]

    async def update(
        self,
        key_id: str,
        *,
        name: str = NOT_GIVEN,
        scopes: Sequence[str] = NOT_GIVEN,
        allowed_skills: _Skills = NOT_GIVEN,
        expires_at: _When = NOT_GIVEN,
        spend_limit_usd: _Usd = NOT_GIVEN,
        spend_limit_period: Optional[str] = NOT_GIVEN,
        metadata: Optional[Mapping[str, str]] = NOT_GIVEN,
        timeout: Optional[TimeoutTypes] = None,
    ) -> ApiKey:
        body = key_body(name, scopes, allowed_skills, expires_at, spend_limit_usd, spend_limit_period, metadata)
        return ApiKey.parse((await self._client._request("PATCH", key_path(key_id), body, None, timeout))[1].get("data") or {})

    async def revoke(self, key_id: str, timeout: Optional[TimeoutTypes] = None) -> RevokedKey:
        data = (await self._client._request("DELETE", key_path(key_id), None, None, timeout, retries=0))[1].get("data") or {}
        return RevokedKey(id=str(data.get("id") or key_id), revoked=bool(data.get("revoked")))
