// Internal error, plain on purpose: a broken invariant of the gateway's own wallets (logged; a client only ever sees internal_error).
export class WalletError extends Error {
  override name = "WalletError";
}
