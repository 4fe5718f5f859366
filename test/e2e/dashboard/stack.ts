import type { RunOnceReturnType } from "../../../server/settlement/settler";
import { DEV_ACCOUNT_INDEX, devAccount } from "../../../server/devstack/local-node";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../../helpers/aa-stack";
import { type TestStack, startStack } from "../../helpers/gateway";
import type { Sql } from "../../../server/db/sql";

/**
 * Everything the dashboard talks to, real: a `hardhat node` with the escrow, the ERC-4337
 * contracts and the Alto bundler (embedded wallets, the seller's claim), and the gateway on
 * port 0 of 127.0.0.1 with the whole money path: the sandbox card provider funded by the
 * deployer, the settler's and the voucher signer's keys, and the deposit indexer running.
 */
export interface DashboardStack {
  aa: AaStack;
  stack: TestStack;
  /** The gateway's origin, http://127.0.0.1:<port>: the one origin the browser may reach. */
  origin: string;
  /** The sign-in link last mailed to `email`, read from the dev mailer's outbox table. */
  signInLink(email: string): Promise<string>;
  /** Runs one settlement step, as the settler's loop would: posts a batch of the paid calls. */
  settle(): Promise<RunOnceReturnType>;
  close(): Promise<void>;
}

/** How often the deposit indexer looks for new deposits: a card top-up shows up within this. */
const INDEXER_INTERVAL_MS = 100;

export async function startDashboardStack(): Promise<DashboardStack> {
  const aa = await startAaStack();
  let stack: TestStack | undefined;
  try {
    const options = gatewayOptionsFor(aa);
    const wallet = (index: number) => aa.node.walletFor(devAccount(index));
    stack = await startStack({
      buyerUsd: "0",
      gateway: {
        ...options,
        chain: {
          ...options.chain!,
          settlerWallet: wallet(DEV_ACCOUNT_INDEX.settler),
          voucherSigner: wallet(DEV_ACCOUNT_INDEX.voucherSigner),
          // The deployer owns the test USDC: card top-ups are funded with what it mints.
          fundingWallet: wallet(DEV_ACCOUNT_INDEX.deployer),
        },
      },
    });
    // The indexer runs on its own, as under `npm start`; the settler is stepped by the test.
    stack.gw.moneyPath!.indexer.start(INDEXER_INTERVAL_MS);
  } catch (error) {
    await stack?.close();
    await aa.stop();
    throw error;
  }
  const started = stack;
  const db = started.gw.db;
  return {
    aa,
    stack: started,
    origin: new URL(started.url).origin,
    signInLink: (email) => mailedSignInLink(db, email),
    settle: () => started.gw.moneyPath!.settler!.runOnce(),
    async close() {
      await started.close();
      await aa.stop();
    },
  };
}

/** The sign-in link last mailed to `email`, read from the dev mailer's outbox table. */
export async function mailedSignInLink(db: Sql, email: string): Promise<string> {
  const body = await db.value<string>("SELECT body FROM outbox WHERE to_address = ? ORDER BY id DESC LIMIT 1", [email]);
  const link = body && /https?:\/\/\S+\/auth\/email\/callback\?token=[A-Za-z0-9_%-]+/.exec(body)?.[0];
  if (!link) throw new Error(`no sign-in link was mailed to ${email}`);
  return link;
}
