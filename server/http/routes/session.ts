import express, { type Router } from "express";
import type { Sessions } from "../../identity/sessions";
import { getEmbeddedWallet } from "../../wallets/wallets";
import type { AddressesStore } from "../../settlement/addresses-store";
import type { Ledger } from "../../ledger/ledger";
import { microsToUsd } from "../../ledger/money";
import { checkDisplayName } from "../../identity/display-name";
import { displayNameOf, setDisplayName } from "../../identity/display-name-store";
import { jsonBody } from "../json-body";
import { parseRequest } from "../contract/common";
import { accountView, meView, updateAccountBody } from "../contract/account";
import { dataEnvelope, dataEnvelopeOf } from "../envelope";
import { refuse } from "../errors";
import { requireSession, closeSession } from "../session-cookies";

/**
 * The signed-in person's own view (dashboard session, not an API key):
 *   GET  /v1/me          the account, its display name, identities, wallet address and balance
 *   PATCH /v1/account    { display_name } sets the name the marketplace shows as its skills' seller (null removes it)
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
      dataEnvelopeOf(meView, {
        account_id: account.id,
        name: account.name,
        display_name: await displayNameOf(deps.ledger.db, accountId),
        identities: identities.map((i) => ({ provider: i.provider, subject: i.subject, linked_at: new Date(i.createdAtMs).toISOString() })),
        addresses: await deps.addresses.addressesOf(accountId),
        wallet: await walletOf(deps.ledger, accountId),
        balance: { currency: "USDC", available: microsToUsd(availableMicros), held: microsToUsd(heldMicros) },
      }),
    );
  });

  router.patch("/v1/account", session, jsonBody(4_096), async (req, res) => {
    const accountId = req.session!.accountId;
    const body = parseRequest(updateAccountBody, req.body);
    let displayName: string | null = null;
    if (body.display_name !== null) {
      const checked = checkDisplayName(body.display_name);
      if (!checked.ok) refuse(checked);
      displayName = checked.name;
    }
    await setDisplayName(deps.ledger.db, accountId, displayName);
    res.json(dataEnvelopeOf(accountView, { account_id: accountId, display_name: displayName }));
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
