export { SkillGateway, type SkillHandle, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS } from "./client";
export {
  SkillGatewayError,
  type SkillGatewayErrorOptions,
  BadRequestError,
  AuthenticationError,
  InsufficientBalanceError,
  KeySpendLimitReachedError,
  NotFoundError,
  ConflictError,
  PriceAboveMaxError,
  RateLimitError,
  InternalServerError,
  SkillError,
  ConnectionError,
  TimeoutError,
} from "./errors";
export { costLine, failureLine, failureText, priceAboveCapText, qualityLine, usdText } from "./tool-text";
export {
  verifyReceipt,
  callIdToBytes32,
  microsToUsdText,
  type VerifyReceiptOptions,
  type VerifyReceiptResult,
  type ProvenReceipt,
  type ReceiptFailure,
  type ReceiptFailureCode,
  type Eip1193Provider,
} from "./verify-receipt";
export type { CallReceipt, SettledCallReceipt, UnsettledCallReceipt } from "./receipt";
export { UsagePage, type UsagePagePromise } from "./pagination";
export { Keys } from "./keys";
export { type BackoffOptions, DEFAULT_BACKOFF } from "./retry";
export type {
  Balance,
  CallMetadata,
  CallOptions,
  CallResult,
  KeyStatus,
  RateLimitInfo,
  RequestOptions,
  Skill,
  SkillQuality,
  SkillGatewayOptions,
  UsageCall,
  UsageParams,
  ApiKey,
  CreatedApiKey,
  CreateKeyParams,
  UpdateKeyParams,
  KeyScope,
  SpendPeriod,
} from "./types";
export {
  MANIFEST_FILE,
  MANIFEST_VERSION,
  SMALLEST_CAP_USD,
  ManifestError,
  type Manifest,
  type ManifestErrorCode,
  type ManifestSkill,
  type WrittenFile,
  emptyManifest,
  findSkill,
  isManifestError,
  manifestProblem,
  parseManifest,
  pinnedCap,
  readManifest,
} from "./manifest";
export { VERSION } from "./version";
