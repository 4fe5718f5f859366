"""``SkillGateway`` (sync) and ``AsyncSkillGateway`` (async): the same surface over httpx."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Generator, Iterator, List, Mapping, Optional

from urllib.parse import quote

import httpx

from ._base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    BaseClient,
    MaxPrice,
    TimeoutTypes,
    merge_params,
    new_idempotency_key,
    skill_path,
    usage_path,
    usd_text,
)
from ._keys import AsyncKeys, Keys
from ._types import Balance, CallMetadata, CallResult, KeyStatus, Skill, UsageCall, parse_usage_page

__all__ = [
    "SkillGateway",
    "AsyncSkillGateway",
    "SkillHandle",
    "AsyncSkillHandle",
    "UsagePage",
    "AsyncUsagePage",
    "AsyncUsagePager",
]


def _call_body(skill: str, input: Optional[Mapping[str, Any]], max_price: Optional[MaxPrice]) -> Dict[str, Any]:
    """``POST /v1/call``'s body: the skill, its input, and ``max_price`` (as exact decimal text) when given."""
    body: Dict[str, Any] = {"skill_id": skill, "input": dict(input or {})}
    if max_price is not None:
        body["max_price"] = usd_text(max_price)
    return body


def _cap_header(max_price: Optional[MaxPrice]) -> Optional[Dict[str, str]]:
    """The ``X-Max-Price`` header of the per-skill endpoint, whose body is the skill's own; None without a cap."""
    return None if max_price is None else {"x-max-price": usd_text(max_price)}


# ------------------------------------------------------------------------------------------
# Sync
# ------------------------------------------------------------------------------------------


class SkillGateway(BaseClient):
    """A client of one Skill Gateway with one API key.

    >>> with SkillGateway(api_key="atom_...") as client:
    ...     result = client.call("echo", {"hello": "world"})
    ...     result.data, result.metadata.cost
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: TimeoutTypes = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: Optional[httpx.Client] = None,
        retry_skill_failures: bool = False,
    ) -> None:
        super().__init__(api_key, base_url, timeout, max_retries, retry_skill_failures)
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.Client()
        self._sleep: Callable[[float], None] = time.sleep
        self.skills = Skills(self)
        """The marketplace: ``skills.list()`` and ``skills.get(slug_or_id)``."""
        self.keys = Keys(self)
        """The account's API keys from code (the key needs ``keys:manage``): ``keys.create/list/update/revoke``."""

    # -- lifecycle --

    def close(self) -> None:
        """Closes the connection pool (not an ``http_client`` passed in: its owner closes it)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> "SkillGateway":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the API --

    def call(
        self,
        skill: str,
        input: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[TimeoutTypes] = None,
        max_price: Optional[MaxPrice] = None,
        retry_skill_failures: Optional[bool] = None,
    ) -> CallResult:
        """Calls a skill by slug or UUID through ``POST /v1/call``. Retried on 429 and connection
        failures with one Idempotency-Key, so it is charged at most once; a failure where the
        seller may have done the work (a skill's 502, a 500) only with ``retry_skill_failures``. With
        ``max_price`` (USD), a skill priced above it raises ``PriceAboveMaxError``, charging nothing."""
        return self._call("/v1/call", _call_body(skill, input, max_price), idempotency_key, timeout, None, retry_skill_failures)

    def skill(self, slug_or_id: str) -> "SkillHandle":
        """A skill to call through its own endpoint, ``POST /v1/skills/:skillId/call``."""
        return SkillHandle(self, slug_or_id)

    def balance(self, timeout: Optional[TimeoutTypes] = None) -> Balance:
        """``GET /v1/balance``: the key's account balance, available and held."""
        return Balance.parse(self._get("/v1/balance", timeout) or {})

    def key(self, timeout: Optional[TimeoutTypes] = None) -> KeyStatus:
        """``GET /v1/key``: the calling key's own record and budget (any key may read itself): its
        scopes, allowed skills and expiry, its spending limit, what it spent and what remains, and
        the account's available balance."""
        return KeyStatus.parse(self._get("/v1/key", timeout) or {})

    def receipt(self, call_id: str, timeout: Optional[TimeoutTypes] = None) -> Dict[str, Any]:
        """``GET /v1/calls/:callId/receipt``: a paid call's settlement receipt and Merkle proof (or its
        ``status``, ``not_charged`` or ``unsettled``, until its batch is posted), as a dict to check
        with ``verify_receipt`` or to save as JSON and check later without the gateway."""
        return dict(self._get(f"/v1/calls/{quote(call_id, safe='')}/receipt", timeout) or {})

    def usage(self, limit: Optional[int] = None, before: Optional[int] = None, timeout: Optional[TimeoutTypes] = None) -> "UsagePage":
        """``GET /v1/usage``: the account's calls, newest first. The first page
        (``page.calls``, ``page.next_page()``); iterate it for every call of every page:
        ``for call in client.usage(limit=100): ...``."""

        def fetch(before: Optional[int]) -> UsagePage:
            calls, next_before = parse_usage_page(self._get(usage_path(limit, before), timeout))
            return UsagePage(calls, next_before, fetch)

        return fetch(before)

    # -- transport --

    def _call(
        self,
        path: str,
        body: Dict[str, Any],
        idempotency_key: Optional[str],
        timeout: Optional[TimeoutTypes],
        headers: Optional[Dict[str, str]] = None,
        retry_skill_failures: Optional[bool] = None,
    ) -> CallResult:
        key = idempotency_key or new_idempotency_key()
        retry_failures = self.retry_skill_failures if retry_skill_failures is None else retry_skill_failures
        response, envelope = self._request("POST", path, body, key, timeout, headers, retry_failures)
        return CallResult(data=envelope.get("data"), metadata=CallMetadata.parse(envelope.get("metadata"), response.headers, key))

    def _get(self, path: str, timeout: Optional[TimeoutTypes]) -> Any:
        return self._request("GET", path, None, None, timeout)[1].get("data")

    def _request(
        self,
        method: str,
        path: str,
        body: Any,
        idempotency_key: Optional[str],
        timeout: Optional[TimeoutTypes],
        extra: Optional[Dict[str, str]] = None,
        skill_call: Optional[bool] = None,
        retries: Optional[int] = None,
    ) -> "tuple[httpx.Response, Dict[str, Any]]":
        headers = self._headers(body is not None, idempotency_key, extra)
        content = self._encode(body)
        t = self._timeout(timeout)
        retry = 0
        while True:
            try:
                try:
                    response = self._client.request(method, self.base_url + path, headers=headers, content=content, timeout=t)
                except httpx.TransportError as cause:
                    raise self._no_answer(cause, idempotency_key, t) from cause
                return response, self._process(response, idempotency_key)
            except Exception as error:
                delay = self._retry_delay(error, retry, skill_call, retries)
                if delay is None:
                    raise
                self._sleep(delay)
                retry += 1


class Skills:
    """``client.skills``: the marketplace (no API key needed)."""

    def __init__(self, client: SkillGateway) -> None:
        self._client = client

    def list(self, timeout: Optional[TimeoutTypes] = None) -> List[Skill]:
        """``GET /v1/skills``: every listed skill."""
        return [Skill.parse(s) for s in self._client._get("/v1/skills", timeout) or [] if isinstance(s, Mapping)]

    def get(self, skill: str, timeout: Optional[TimeoutTypes] = None) -> Skill:
        """``GET /v1/skills/:skillId``: one skill by slug or UUID (NotFoundError when none)."""
        return Skill.parse(self._client._get(skill_path(skill), timeout) or {})


class SkillHandle:
    """``client.skill("uppercase")``: one skill, called through its own endpoint."""

    def __init__(self, client: SkillGateway, slug_or_id: str) -> None:
        self._client = client
        self.id = slug_or_id

    def __repr__(self) -> str:
        return f"SkillHandle({self.id!r})"

    def call(
        self,
        params: Optional[Mapping[str, Any]] = None,
        /,
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[TimeoutTypes] = None,
        max_price: Optional[MaxPrice] = None,
        retry_skill_failures: Optional[bool] = None,
        **kwargs: Any,
    ) -> CallResult:
        """``POST /v1/skills/:skillId/call`` with the skill's parameters as the flat body:
        ``call(text="hi")`` or ``call({"text": "hi"})``. ``max_price`` (USD) is sent as the
        ``X-Max-Price`` header (a parameter of the skill named so goes in ``params``)."""
        return self._client._call(
            skill_path(self.id) + "/call", merge_params(params, kwargs), idempotency_key, timeout, _cap_header(max_price), retry_skill_failures
        )

    def get(self, timeout: Optional[TimeoutTypes] = None) -> Skill:
        """The skill's marketplace record."""
        return self._client.skills.get(self.id, timeout)

    def as_tool_schema(self, format: str = "openai") -> Dict[str, Any]:
        """The skill's tool definition (fetches its record): see ``Skill.as_tool_schema``."""
        return self.get().as_tool_schema(format)


class UsagePage:
    """One page of ``GET /v1/usage``, newest call first; iterating it yields every call from
    this page on, fetching the following pages as it goes."""

    def __init__(self, calls: List[UsageCall], next_before: Optional[int], fetch: Callable[[int], "UsagePage"]) -> None:
        self.calls = calls
        self.next_before = next_before
        """The ``before`` of the next page; None on the last page."""
        self._fetch = fetch

    def __repr__(self) -> str:
        return f"UsagePage(calls=<{len(self.calls)}>, next_before={self.next_before!r})"

    def has_next_page(self) -> bool:
        return self.next_before is not None

    def next_page(self) -> Optional["UsagePage"]:
        return None if self.next_before is None else self._fetch(self.next_before)

    def iter_pages(self) -> Iterator["UsagePage"]:
        page: Optional[UsagePage] = self
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[UsageCall]:
        for page in self.iter_pages():
            yield from page.calls


# ------------------------------------------------------------------------------------------
# Async
# ------------------------------------------------------------------------------------------


class AsyncSkillGateway(BaseClient):
    """The async client: the same surface as ``SkillGateway``, every request awaited.

    >>> async with AsyncSkillGateway() as client:
    ...     result = await client.call("echo", {"hello": "world"})
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        timeout: TimeoutTypes = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: Optional[httpx.AsyncClient] = None,
        retry_skill_failures: bool = False,
    ) -> None:
        super().__init__(api_key, base_url, timeout, max_retries, retry_skill_failures)
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        self.skills = AsyncSkills(self)
        self.keys = AsyncKeys(self)

    async def close(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> "AsyncSkillGateway":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def call(
        self,
        skill: str,
        input: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[TimeoutTypes] = None,
        max_price: Optional[MaxPrice] = None,
        retry_skill_failures: Optional[bool] = None,
    ) -> CallResult:
        """Calls a skill by slug or UUID through ``POST /v1/call`` (see ``SkillGateway.call``)."""
        return await self._call("/v1/call", _call_body(skill, input, max_price), idempotency_key, timeout, None, retry_skill_failures)

    def skill(self, slug_or_id: str) -> "AsyncSkillHandle":
        return AsyncSkillHandle(self, slug_or_id)

    async def balance(self, timeout: Optional[TimeoutTypes] = None) -> Balance:
        return Balance.parse(await self._get("/v1/balance", timeout) or {})

    async def key(self, timeout: Optional[TimeoutTypes] = None) -> KeyStatus:
        """``GET /v1/key``: the calling key's own record and budget (see ``SkillGateway.key``)."""
        return KeyStatus.parse(await self._get("/v1/key", timeout) or {})

    async def receipt(self, call_id: str, timeout: Optional[TimeoutTypes] = None) -> Dict[str, Any]:
        """``GET /v1/calls/:callId/receipt`` (see ``SkillGateway.receipt``)."""
        return dict(await self._get(f"/v1/calls/{quote(call_id, safe='')}/receipt", timeout) or {})

    def usage(self, limit: Optional[int] = None, before: Optional[int] = None, timeout: Optional[TimeoutTypes] = None) -> "AsyncUsagePager":
        """``GET /v1/usage``: await it for the first page, or ``async for`` over it for every
        call of every page."""

        async def fetch(before: Optional[int]) -> AsyncUsagePage:
            calls, next_before = parse_usage_page(await self._get(usage_path(limit, before), timeout))
            return AsyncUsagePage(calls, next_before, fetch)

        return AsyncUsagePager(lambda: fetch(before))

    async def _call(
        self,
        path: str,
        body: Dict[str, Any],
        idempotency_key: Optional[str],
        timeout: Optional[TimeoutTypes],
        headers: Optional[Dict[str, str]] = None,
        retry_skill_failures: Optional[bool] = None,
    ) -> CallResult:
        key = idempotency_key or new_idempotency_key()
        retry_failures = self.retry_skill_failures if retry_skill_failures is None else retry_skill_failures
        response, envelope = await self._request("POST", path, body, key, timeout, headers, retry_failures)
        return CallResult(data=envelope.get("data"), metadata=CallMetadata.parse(envelope.get("metadata"), response.headers, key))

    async def _get(self, path: str, timeout: Optional[TimeoutTypes]) -> Any:
        return (await self._request("GET", path, None, None, timeout))[1].get("data")

    async def _request(
        self,
        method: str,
        path: str,
        body: Any,
        idempotency_key: Optional[str],
        timeout: Optional[TimeoutTypes],
        extra: Optional[Dict[str, str]] = None,
        skill_call: Optional[bool] = None,
        retries: Optional[int] = None,
    ) -> "tuple[httpx.Response, Dict[str, Any]]":
        headers = self._headers(body is not None, idempotency_key, extra)
        content = self._encode(body)
        t = self._timeout(timeout)
        retry = 0
        while True:
            try:
                try:
                    response = await self._client.request(method, self.base_url + path, headers=headers, content=content, timeout=t)
                except httpx.TransportError as cause:
                    raise self._no_answer(cause, idempotency_key, t) from cause
                return response, self._process(response, idempotency_key)
            except Exception as error:
                delay = self._retry_delay(error, retry, skill_call, retries)
                if delay is None:
                    raise
                await self._sleep(delay)
                retry += 1


class AsyncSkills:
    def __init__(self, client: AsyncSkillGateway) -> None:
        self._client = client

    async def list(self, timeout: Optional[TimeoutTypes] = None) -> List[Skill]:
        return [Skill.parse(s) for s in await self._client._get("/v1/skills", timeout) or [] if isinstance(s, Mapping)]

    async def get(self, skill: str, timeout: Optional[TimeoutTypes] = None) -> Skill:
        return Skill.parse(await self._client._get(skill_path(skill), timeout) or {})


class AsyncSkillHandle:
    def __init__(self, client: AsyncSkillGateway, slug_or_id: str) -> None:
        self._client = client
        self.id = slug_or_id

    def __repr__(self) -> str:
        return f"AsyncSkillHandle({self.id!r})"

    async def call(
        self,
        params: Optional[Mapping[str, Any]] = None,
        /,
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[TimeoutTypes] = None,
        max_price: Optional[MaxPrice] = None,
        retry_skill_failures: Optional[bool] = None,
        **kwargs: Any,
    ) -> CallResult:
        return await self._client._call(
            skill_path(self.id) + "/call", merge_params(params, kwargs), idempotency_key, timeout, _cap_header(max_price), retry_skill_failures
        )

    async def get(self, timeout: Optional[TimeoutTypes] = None) -> Skill:
        return await self._client.skills.get(self.id, timeout)

    async def as_tool_schema(self, format: str = "openai") -> Dict[str, Any]:
        return (await self.get()).as_tool_schema(format)


class AsyncUsagePage:
    """One page of ``GET /v1/usage``; ``async for`` over it yields every call from this page on."""

    def __init__(self, calls: List[UsageCall], next_before: Optional[int], fetch: Callable[[int], Awaitable["AsyncUsagePage"]]) -> None:
        self.calls = calls
        self.next_before = next_before
        self._fetch = fetch

    def __repr__(self) -> str:
        return f"AsyncUsagePage(calls=<{len(self.calls)}>, next_before={self.next_before!r})"

    def has_next_page(self) -> bool:
        return self.next_before is not None

    async def next_page(self) -> Optional["AsyncUsagePage"]:
        return None if self.next_before is None else await self._fetch(self.next_before)

    async def iter_pages(self) -> AsyncIterator["AsyncUsagePage"]:
        page: Optional[AsyncUsagePage] = self
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> AsyncIterator[UsageCall]:
        async for page in self.iter_pages():
            for call in page.calls:
                yield call


class AsyncUsagePager:
    """What ``AsyncSkillGateway.usage()`` returns: ``await`` it for the first page, or
    ``async for call in client.usage()`` for every call across all pages."""

    def __init__(self, first: Callable[[], Awaitable[AsyncUsagePage]]) -> None:
        self._first = first

    def __await__(self) -> Generator[Any, None, AsyncUsagePage]:
        return self._first().__await__()

    async def __aiter__(self) -> AsyncIterator[UsageCall]:
        page = await self._first()
        async for call in page:
            yield call
