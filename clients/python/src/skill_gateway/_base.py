"""What the sync and async clients share: configuration, requests, answers, retry policy."""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
import uuid
from decimal import Decimal
from typing import Any, Dict, Mapping, Optional, Union

import httpx

from ._exceptions import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    RateLimitError,
    SkillGatewayError,
    error_from_response,
)
from ._version import __version__

DEFAULT_BASE_URL = "http://127.0.0.1:8787"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
"""The wait before the first retry, before jitter, in seconds."""
MAX_RETRY_DELAY = 8.0
"""The longest wait between two attempts, in seconds."""
MAX_RETRY_AFTER = 60.0
"""A 429 whose Retry-After is longer than this is raised at once (a daily limit's is hours away)."""

TimeoutTypes = Union[float, httpx.Timeout]

MaxPrice = Union[Decimal, str, int, float]
"""A price cap in USD: a Decimal, a decimal string ("0.002"), an int or a float."""


def _from_environment(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return value or None


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class BaseClient:
    api_key: Optional[str]
    base_url: str
    timeout: TimeoutTypes
    max_retries: int
    retry_skill_failures: bool
    """Whether a skill call is retried after a failure where the seller may have done the work."""

    def __init__(
        self, api_key: Optional[str], base_url: Optional[str], timeout: TimeoutTypes, max_retries: int, retry_skill_failures: bool = False
    ) -> None:
        if isinstance(timeout, (int, float)) and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0, not {max_retries!r}")
        self.api_key = api_key if api_key is not None else _from_environment("SKILL_GATEWAY_API_KEY")
        self.base_url = (base_url or _from_environment("SKILL_GATEWAY_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_skill_failures = bool(retry_skill_failures)
        # Tuning of the waits between retries; tests set them to 0.
        self._initial_retry_delay = INITIAL_RETRY_DELAY
        self._max_retry_delay = MAX_RETRY_DELAY
        self._max_retry_after = MAX_RETRY_AFTER
        self._random = random.random

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    # -- requests ---------------------------------------------------------------------------

    def _headers(self, has_body: bool, idempotency_key: Optional[str], extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        headers = {**(extra or {}), "accept": "application/json", "user-agent": f"skill-gateway-python/{__version__}"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        if has_body:
            headers["content-type"] = "application/json"
        if idempotency_key is not None:
            headers["idempotency-key"] = idempotency_key
        return headers

    @staticmethod
    def _encode(body: Any) -> Optional[bytes]:
        return None if body is None else json.dumps(body, default=_json_default).encode("utf-8")

    def _timeout(self, timeout: Optional[TimeoutTypes]) -> httpx.Timeout:
        value = self.timeout if timeout is None else timeout
        return value if isinstance(value, httpx.Timeout) else httpx.Timeout(value)

    def _no_answer(self, cause: Exception, idempotency_key: Optional[str], timeout: httpx.Timeout) -> APIConnectionError:
        if isinstance(cause, httpx.TimeoutException):
            return APITimeoutError(f"No answer from the gateway at {self.base_url} in time ({timeout.read} s).", idempotency_key=idempotency_key)
        return APIConnectionError(f"Could not reach the gateway at {self.base_url}: {cause}", idempotency_key=idempotency_key)

    # -- answers ----------------------------------------------------------------------------

    def _process(self, response: httpx.Response, idempotency_key: Optional[str]) -> Dict[str, Any]:
        """The success envelope of an answer, or the error it stands for."""
        try:
            body: Any = response.json() if response.content else None
        except ValueError:
            body = None
        envelope = body if isinstance(body, dict) else None
        if response.is_success and envelope is not None and envelope.get("success") is True:
            return envelope
        if response.is_success:
            # A 2xx that is not the gateway's envelope: something else answered (a proxy, a wrong base_url).
            raise APIStatusError(
                f"The answer from {self.base_url} is not a Skill Gateway response (HTTP {response.status_code}).",
                status_code=response.status_code,
                code="invalid_response",
                idempotency_key=idempotency_key,
                response=response,
                body=body,
            )
        raise error_from_response(
            response, envelope, idempotency_key=idempotency_key, retry_after=parse_retry_after(response.headers.get("retry-after"))
        )

    # -- retries ----------------------------------------------------------------------------

    def _backoff(self, retry: int) -> float:
        """Exponential, capped, jittered between half and all of it."""
        ceiling = min(self._max_retry_delay, self._initial_retry_delay * 2**retry)
        return ceiling / 2 + self._random() * ceiling / 2

    def _retry_delay(
        self, error: Exception, retry: int, skill_call: Optional[bool] = None, max_retries: Optional[int] = None
    ) -> Optional[float]:
        """How long to wait before retry number ``retry`` (0 first) after ``error``, or None.

        Retried, always under the call's one Idempotency-Key: 429 (after its Retry-After),
        connection failures and time-outs, and 409 ``idempotency_key_in_use`` (an earlier
        attempt of this very call is still running). A 500, or a skill's 502 (``skill_timeout``,
        ``skill_error``, ``skill_invalid_response``, ``skill_unreachable``): for a request that
        runs no skill (``skill_call`` None), and for a skill call only when ``skill_call`` is
        True (``retry_skill_failures``): the seller may have done the work, and a retry does it
        again, under the same X-Skill-Idempotency-Key. Never: 502 ``skill_backend_forbidden``,
        400, 401, 402, 403, 404, 409 ``price_above_max``, 422 and the rest.
        ``max_retries`` overrides the client's for one request (0 for one that must not be sent twice).
        """
        if retry >= (self.max_retries if max_retries is None else max_retries):
            return None
        if isinstance(error, RateLimitError):
            if error.retry_after is None:
                return self._backoff(retry)
            return error.retry_after if error.retry_after <= self._max_retry_after else None
        if isinstance(error, APIConnectionError):
            return self._backoff(retry)
        if not isinstance(error, SkillGatewayError):
            return None
        if error.status_code == 502 and error.code == "skill_backend_forbidden":
            return None
        if error.status_code in (500, 502):
            return self._backoff(retry) if skill_call is None or skill_call else None
        if error.status_code == 409 and error.code == "idempotency_key_in_use":
            return self._backoff(retry)
        return None


def usd_text(value: MaxPrice) -> str:
    """A USD amount as the decimal text the gateway reads (``max_price``, ``X-Max-Price``): a
    Decimal or float written out without an exponent (``Decimal("1E-3")`` is ``"0.001"``), a
    string as it is. The gateway refuses what is not above 0 with at most 6 decimals (400)."""
    if isinstance(value, bool):
        raise TypeError("max_price must be a USD amount, not a bool")
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    raise TypeError(f"max_price must be a USD amount (Decimal, str, int or float), not {type(value).__name__}")


def skill_path(skill: str) -> str:
    from urllib.parse import quote

    return f"/v1/skills/{quote(skill, safe='')}"


def usage_path(limit: Optional[int], before: Optional[int]) -> str:
    from urllib.parse import urlencode

    query: Dict[str, Any] = {}
    if limit is not None:
        query["limit"] = limit
    if before is not None:
        query["before"] = before
    return "/v1/usage" + (f"?{urlencode(query)}" if query else "")


def merge_params(params: Optional[Mapping[str, Any]], kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    merged: Dict[str, Any] = dict(params or {})
    merged.update(kwargs)
    return merged
