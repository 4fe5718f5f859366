import express, { type Router } from "express";
import QRCode from "qrcode";
import { type Address, getAddress } from "viem";
import { skillEscrowAbi } from "../../chain/abi";
import type { OAuthSignIn } from "../../identity/oauth";
import type { Sessions } from "../../identity/sessions";
import { getEmbeddedWallet } from "../../wallets/wallets";
import type { ChainConnection } from "../../settlement/money-path";
import type { Config } from "../../config";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { MAX_CARD_TOPUP_MICROS } from "../../payments/card-topups";
import { dataEnvelopeOf } from "../envelope";
import { platformView } from "../contract/platform";
import { ApiError } from "../errors";
import { requireSession } from "../session-cookies";

/**
 * What the dashboard needs to know about this gateway, and the wallet's QR code:
 *   GET /v1/platform        (public) chain, contracts, fee, minimum deposit, the largest card top-up, the
 *                           bounds of a skill's price, which sign-ins are on
 *   GET /v1/wallet/qr.svg   (session) an EIP-681 QR code: "send USDC on this chain to my wallet"
 */
export function platformRoutes(deps: {
  config: Config;
  ledger: Ledger;
  sessions: Sessions;
  oauth: OAuthSignIn;
  chain?: ChainConnection;
}): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);
  // The escrow's token never changes; read it once.
  let usdc: Promise<Address> | undefined;
  const usdcOf = (chain: ChainConnection) =>
    (usdc ??= chain.publicClient
      .readContract({ address: chain.escrowAddress, abi: skillEscrowAbi, functionName: "usdc" })
      .catch((error) => {
        usdc = undefined;
        throw error;
      }));

  router.get("/v1/platform", async (_req, res) => {
    const chain = deps.chain;
    let onChain = null;
    if (chain) {
      try {
        const [token, minDeposit] = await Promise.all([
          usdcOf(chain),
          chain.publicClient.readContract({ address: chain.escrowAddress, abi: skillEscrowAbi, functionName: "minDeposit" }),
        ]);
        onChain = { chain_id: chain.chainId, escrow: chain.escrowAddress, usdc: token, min_deposit: microsToUsd(minDeposit) };
      } catch {
        throw new ApiError("chain_unavailable", "The gateway's chain cannot be reached right now.");
      }
    }
    res.json(
      dataEnvelopeOf(platformView, {
        chain_id: onChain?.chain_id ?? null,
        escrow: onChain?.escrow ?? null,
        usdc: onChain?.usdc ?? null,
        min_deposit: onChain?.min_deposit ?? null,
        card_topup_max: microsToUsd(MAX_CARD_TOPUP_MICROS),
        skill_price_min: microsToUsd(deps.config.minSkillPriceMicros),
        skill_price_max: microsToUsd(deps.config.maxSkillPriceMicros),
        fee_bps: Number(deps.config.feeBps),
        fee_mode: deps.config.feeMode,
        email_delivery: deps.config.smtpUrl ? "smtp" : "outbox",
        sign_in: { email: true, siwe: true, github: deps.oauth.configured("github"), google: deps.oauth.configured("google") },
      }),
    );
  });

  router.get("/v1/wallet/qr.svg", session, async (req, res) => {
    const wallet = await getEmbeddedWallet(deps.ledger.db, req.session!.accountId);
    if (!wallet) throw new ApiError("not_found", "This account has no embedded wallet yet.");
    if (!deps.chain) throw new ApiError("chain_not_configured", "The gateway has no chain: there is nowhere to send USDC.");
    let token: Address;
    try {
      token = await usdcOf(deps.chain);
    } catch {
      throw new ApiError("chain_unavailable", "The gateway's chain cannot be reached right now.");
    }
    // EIP-681: a transfer of the token on this chain to the wallet; wallets fill in the amount.
    const uri = `ethereum:${getAddress(token)}@${deps.chain.chainId}/transfer?address=${getAddress(wallet.address)}`;
    const svg = await QRCode.toString(uri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
    res.set("cache-control", "private, max-age=3600").type("image/svg+xml").send(svg);
  });

  return router;
}
