"""Skill Gateway's Python client: ``SkillGateway`` (sync) and ``AsyncSkillGateway`` (async)."""

from ._base import DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from ._client import (
    AsyncSkillGateway,
    AsyncSkillHandle,
    AsyncUsagePage,
    AsyncUsagePager,
    SkillGateway,
    SkillHandle,
    UsagePage,
)
from ._exceptions import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientBalanceError,
    InternalServerError,
    KeySpendLimitReachedError,
    NotFoundError,
    RateLimitError,
    SkillError,
    SkillGatewayError,
)
from ._keys import NOT_GIVEN, ApiKey, AsyncKeys, CreatedApiKey, Keys, RevokedKey
from ._types import Balance, CallMetadata, CallResult, RateLimitInfo, Skill, UsageCall
from ._version import __version__

__all__ = [
    "__version__",
    "SkillGateway",
    "AsyncSkillGateway",
    "SkillHandle",
    "AsyncSkillHandle",
    "UsagePage",
    "AsyncUsagePage",
    "AsyncUsagePager",
    "CallResult",
    "CallMetadata",
    "RateLimitInfo",
    "Skill",
    "Balance",
    "UsageCall",
    "Keys",
    "AsyncKeys",
    "ApiKey",
    "CreatedApiKey",
    "RevokedKey",
    "NOT_GIVEN",
    "SkillGatewayError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "InsufficientBalanceError",
    "KeySpendLimitReachedError",
    "NotFoundError",
    "ConflictError",
    "RateLimitError",
    "InternalServerError",
    "SkillError",
    "APIConnectionError",
    "APITimeoutError",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
]
