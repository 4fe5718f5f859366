/**
 * The operations an embedded wallet makes for its account (sweep, claim, withdrawal) × the two kinds of owner: a key
 * the gateway holds ("server": the gateway signs and sends at once) or the account's SIWE address ("siwe": the gateway
 * prepares, the owner signs, then it is submitted). Every operation opens with the same steps, written once here:
 * find the account's wallet (no_wallet), refuse the flow meant for the other kind of owner (the operation's
 * wrong-flow code, saying which path to use), then run under the wallet's lock (the operation's in-progress code while
 * another operation of the wallet is running). A fourth operation is one entry of WALLET_OPERATIONS.
 */
import type { Database } from "../db/sql";
import { type ErrorCode, type Refusal, refusal } from "../errors";
import { type EmbeddedWallet, getEmbeddedWallet, withWalletLock } from "./wallets";

/** Who signs a wallet's operations: a key the gateway holds, or the account's SIWE address. */
export type OwnerKind = EmbeddedWallet["ownerKind"];

interface OperationRules {
  /** Its refusal when the account's wallet has the other kind of owner. */
  wrongFlow: ErrorCode;
  /** Its refusal while another operation of the wallet is running (or this one is being submitted). */
  inProgress: ErrorCode;
  /** What a wallet of each kind of owner is told when it asks for the other kind's flow: which path is its own. */
  useYourFlow: Record<OwnerKind, string>;
}

/** The matrix: each operation's refusals, and for each kind of owner the path it must use. */
export const WALLET_OPERATIONS = {
  sweep: {
    wrongFlow: "wallet_swept_automatically",
    inProgress: "sweep_in_progress",
    useYourFlow: {
      server: "This wallet's owner key is held by the gateway: USDC sent to it is moved into the escrow automatically.",
      siwe: "Your wallet is owned by your own address: prepare the sweep (POST /v1/wallet/sweep/prepare) and sign it.",
    },
  },
  claim: {
    wrongFlow: "wrong_claim_flow",
    inProgress: "claim_in_progress",
    useYourFlow: {
      server: "The gateway holds this wallet's key: claim with POST /v1/seller/claim, no signature needed.",
      siwe: "Your wallet is owned by your own address: prepare the claim (POST /v1/seller/claim/prepare) and sign it.",
    },
  },
  withdrawal: {
    wrongFlow: "wrong_withdrawal_flow",
    inProgress: "withdrawal_in_progress",
    useYourFlow: {
      server: "The gateway holds this wallet's key: withdraw with POST /v1/wallet/withdraw, no signature needed.",
      siwe: "Your wallet is owned by your own address: prepare the withdrawal (POST /v1/wallet/withdraw/prepare) and sign it.",
    },
  },
} as const satisfies Record<string, OperationRules>;

export type WalletOperation = keyof typeof WALLET_OPERATIONS;
/** The wrong-flow code of `Op`. */
export type WrongFlowCode<Op extends WalletOperation> = (typeof WALLET_OPERATIONS)[Op]["wrongFlow"];
/** The in-progress code of `Op`. */
export type InProgressCode<Op extends WalletOperation = WalletOperation> = (typeof WALLET_OPERATIONS)[Op]["inProgress"];

const NO_WALLET = "This account has no embedded wallet yet.";
const IN_PROGRESS = "Another operation of this wallet is being sent; try again in a moment.";

/**
 * The account's wallet for `operation` in the flow of owners of kind `flow`, or the refusal: no_wallet; then
 * `precheck`'s refusal if it has one (a claim's payout address comes before the flow); then the operation's
 * wrong-flow code when the wallet's owner is of the other kind.
 */
export async function walletFor<Op extends WalletOperation, Precheck extends Refusal<ErrorCode> = never>(
  db: Database,
  accountId: string,
  operation: Op,
  flow: OwnerKind,
  precheck?: (wallet: EmbeddedWallet) => Promise<Precheck | undefined>,
): Promise<{ ok: true; wallet: EmbeddedWallet } | Refusal<"no_wallet" | WrongFlowCode<Op>> | Precheck> {
  const wallet = await getEmbeddedWallet(db, accountId);
  if (!wallet) return refusal("no_wallet", NO_WALLET);
  const refused = await precheck?.(wallet);
  if (refused) return refused;
  const rules: OperationRules = WALLET_OPERATIONS[operation];
  if (wallet.ownerKind !== flow) return refusal(rules.wrongFlow as WrongFlowCode<Op>, rules.useYourFlow[wallet.ownerKind]);
  return { ok: true, wallet };
}

/** Runs `fn` under `wallet`'s lock; while another operation of the wallet holds it, `operation`'s in-progress refusal. */
export async function underWalletLock<Op extends WalletOperation, T>(
  wallet: EmbeddedWallet,
  operation: Op,
  fn: () => Promise<T>,
): Promise<T | Refusal<InProgressCode<Op>>> {
  const locked = await withWalletLock(wallet.address, fn);
  return locked.ran ? locked.value : refusal(WALLET_OPERATIONS[operation].inProgress as InProgressCode<Op>, IN_PROGRESS);
}
