"""The client's errors, after openai-python's and anthropic-sdk-python's ``_exceptions.py``.

``SkillGatewayError`` is the base of them all. An answer from the gateway that is not a
success raises an ``APIStatusError`` subclass chosen by its HTTP status, carrying the status,
the gateway's snake_case ``code`` and its ``error`` message. No answer at all raises
``APIConnectionError`` (or its subclass ``APITimeoutError``), whose ``status_code`` is None.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, Optional

import httpx

__all__ = [
    "SkillGatewayError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "InsufficientBalanceError",
    "KeySpendLimitReachedError",
    "NotFoundError",
    "ConflictError",
    "PriceAboveMaxError",
    "RateLimitError",
    "InternalServerError",
    "SkillError",
    "APIConnectionError",
    "APITimeoutError",
]


class SkillGatewayError(Exception):
    """Base of every error this client raises."""

    message: str
    """The gateway's ``error`` message, or the client's own."""
    status_code: Optional[int]
    """The HTTP status of the gateway's answer; None when there was no answer."""
    code: str
    """The gateway's error code (``insufficient_balance``, ...) or the client's (``connection_error``, ``timeout``)."""
    call_id: Optional[str]
    """The gateway's ``X-Call-Id`` for the failed attempt, when it sent one."""
    idempotency_key: Optional[str]
    """The ``Idempotency-Key`` the call was sent with: pass it again to retry the very same call safely."""
    response: Optional[httpx.Response]
    body: Optional[Any]
    details: Dict[str, Any]
    """The body's ``details``: the numbers of a refusal (a 402's price and balance, a 409's price and
    max_price), as the gateway sent them; empty when it sent none. The subclasses read typed fields from it."""

    def __init__(
        self,
        message: str,
        *,
        status_code: Optional[int] = None,
        code: str = "error",
        call_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        response: Optional[httpx.Response] = None,
        body: Optional[Any] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.call_id = call_id
        self.idempotency_key = idempotency_key
        self.response = response
        self.body = body
        details = body.get("details") if isinstance(body, dict) else None
        self.details = dict(details) if isinstance(details, dict) else {}

    def _usd(self, name: str) -> Optional[Decimal]:
        """A USD amount of ``details`` as the Decimal it reads as; None when absent or not a number."""
        value = self.details.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return None
        try:
            return Decimal(str(value))
        except ArithmeticError:
            return None

    @property
    def headers(self) -> Optional[httpx.Headers]:
        return self.response.headers if self.response is not None else None

    def __str__(self) -> str:
        if self.status_code is None:
            return self.message
        return f"Error code: {self.status_code} ({self.code}) - {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(message={self.message!r}, status_code={self.status_code!r}, code={self.code!r})"


class APIStatusError(SkillGatewayError):
    """The gateway answered with a status that is not a success (any not mapped below: 403, 413, 503...)."""

    status_code: int


class BadRequestError(APIStatusError):
    """400: the request or the input is invalid, or the skill's backend refused it. Not retried."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing, malformed, unknown or revoked. Not retried."""


class InsufficientBalanceError(APIStatusError):
    """402: the balance is below the call's price. Nothing was charged. Not retried. ``price`` and
    ``available`` are the gateway's numbers (USD, from the body's ``details``), None when it sent none."""

    @property
    def price(self) -> Optional[Decimal]:
        """What the call would have cost, in USD."""
        return self._usd("price")

    @property
    def available(self) -> Optional[Decimal]:
        """The account's available balance, in USD."""
        return self._usd("available")


class KeySpendLimitReachedError(InsufficientBalanceError):
    """402 ``key_spend_limit_reached``: the API key's spending limit for its period (a UTC day, a
    UTC month, or in total) would be passed. Nothing was charged. Not retried: the message says
    when the limit resets; its owner may raise it. A subclass of ``InsufficientBalanceError``, so
    code that handles "cannot pay for this call" handles it too."""

    @property
    def limit(self) -> Optional[Decimal]:
        """The key's spending limit per period, in USD."""
        return self._usd("limit")

    @property
    def spent(self) -> Optional[Decimal]:
        """What the key's current period has spent, in USD (calls in flight included)."""
        return self._usd("spent")

    @property
    def period(self) -> Optional[str]:
        """The limit's period: ``day``, ``month`` or ``total``."""
        period = self.details.get("period")
        return period if isinstance(period, str) else None

    @property
    def resets_at(self) -> Optional[str]:
        """When the period's count starts again (ISO 8601); None when it never does (``total``) or was not sent."""
        resets_at = self.details.get("resets_at")
        return resets_at if isinstance(resets_at, str) else None


class NotFoundError(APIStatusError):
    """404: no skill with that slug or UUID. Not retried."""


class ConflictError(APIStatusError):
    """409 or 422: the Idempotency-Key is in use by a request still running (409, retried) or
    was used with another body (422, not retried)."""


class PriceAboveMaxError(ConflictError):
    """409 ``price_above_max``: the skill costs more than the call's ``max_price`` (its price was
    raised, or the cap is too low). Nothing was charged. Not retried: call again with a
    ``max_price`` of at least ``price`` to accept the new price."""

    @property
    def price(self) -> Optional[Decimal]:
        """What the skill costs per call now, in USD."""
        return self._usd("price")

    @property
    def max_price(self) -> Optional[Decimal]:
        """The call's max_price, in USD."""
        return self._usd("max_price")


class RateLimitError(APIStatusError):
    """429: a per-key, per-skill or daily limit was reached."""

    retry_after: Optional[float]
    """The gateway's Retry-After in seconds, when it sent one."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class InternalServerError(APIStatusError):
    """500: the gateway failed; the call was not charged."""


class SkillError(APIStatusError):
    """502: the skill's backend failed, timed out or answered something unusable; not charged."""


class APIConnectionError(SkillGatewayError):
    """No answer: the connection was refused, reset or closed before a whole response arrived."""

    def __init__(self, message: str = "Connection error.", *, code: str = "connection_error", **kwargs: Any) -> None:
        super().__init__(message, code=code, **kwargs)


class APITimeoutError(APIConnectionError):
    """No answer within the time-out of one attempt."""

    def __init__(self, message: str = "Request timed out.", **kwargs: Any) -> None:
        kwargs.setdefault("code", "timeout")
        super().__init__(message, **kwargs)


_BY_STATUS = {
    400: BadRequestError,
    401: AuthenticationError,
    402: InsufficientBalanceError,
    404: NotFoundError,
    409: ConflictError,
    422: ConflictError,
    500: InternalServerError,
    502: SkillError,
}


_BY_CODE = {
    "key_spend_limit_reached": KeySpendLimitReachedError,
    "price_above_max": PriceAboveMaxError,
}


def error_from_response(
    response: httpx.Response, body: Any, *, idempotency_key: Optional[str], retry_after: Optional[float]
) -> APIStatusError:
    """The error for an answer that is not a success: the class by code when the code has one of
    its own, else by status; message and code from the gateway's ``{success: false, error, code}``
    envelope when the body is one."""
    status = response.status_code
    envelope = body if isinstance(body, dict) else {}
    error = envelope.get("error")
    message = error if isinstance(error, str) and error else f"The gateway answered HTTP {status}."
    code = envelope.get("code")
    code = code if isinstance(code, str) and code else f"http_{status}"
    kwargs: dict = dict(
        status_code=status,
        code=code,
        call_id=response.headers.get("x-call-id"),
        idempotency_key=idempotency_key,
        response=response,
        body=body,
    )
    if status == 429:
        return RateLimitError(message, retry_after=retry_after, **kwargs)
    by_status = _BY_STATUS.get(status, APIStatusError)
    by_code = _BY_CODE.get(code)
    # A code's own class only refines its status's: the same code on another status keeps the status's class.
    cls = by_code if by_code is not None and issubclass(by_code, by_status) else by_status
    return cls(message, **kwargs)
