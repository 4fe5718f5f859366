import express, { type Router } from "express";
import type { Sessions } from "../../identity/sessions";
import { getEmbeddedWallet } from "../../wallets/wallets";
import type { AddressesStore } from "../../settlement/addresses-store";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { dataEnvelope } from "../envelope";
import { requireSession, closeSession } from "../session-cookies";

/**
 * The signed-in person's own view (dashboard session, not an API key):
 *   GET  /v1/me          the account, its identities, wallet address and balance
 *   POST /auth/logout    ends the session
 * Sign-in routes (SIWE, e-mail, GitHub, Google) open sessions through openSession (../session-cookies.ts).
 */
export function sessionRoutes(deps: { sessions: Sessions; ledger: Ledger; addresses: AddressesStore }): Router {
  const router = express.Router();
  const session = requireSession(deps.sessions);

  router.get("/v1/me", session, async (req, res) => {
    const accountId = req.session!.accountId;
    const account = (await deps.ledger.getAccount(accountId))!;
    const { availableMicros, heldMicros } = await deps.ledger.balance(accountId);
    const identities = await deps.sessions.identitiesOf(accountId);
    res.json(
      dataEnvelope({
        account_id: account.id,
        name: account.name,
        identities: identities.map((i) => ({ provider: i.provider, subject: i.subject, linked_at: new Date(i.createdAtMs).toISOString() })),
        addresses: await deps.addresses.addressesOf(accountId),
        wallet: await walletOf(deps.ledger, accountId),
        balance: { currency: "USDC", available: microsToUsd(availableMicros), held: microsToUsd(heldMicros) },
      }),
    );
  });

  router.post("/auth/logout", session, async (req, res) => {
    await closeSession(deps.sessions, req, res);
    res.json(dataEnvelope({ signed_out: true }));
  });

  return router;
}

/** The account's embedded wallet: where it sends USDC to top up. */
async function walletOf(ledger: Ledger, accountId: string) {
  const wallet = await getEmbeddedWallet(ledger.db, accountId);
  return wallet ? { address: wallet.address, owner: wallet.ownerKind, owner_address: wallet.ownerAddress } : null;
}
