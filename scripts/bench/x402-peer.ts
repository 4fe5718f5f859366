/**
 * The peer a user would pick instead of this gateway: x402 per call, built from the protocol's own packages
 * and nothing else. The server is `@x402/express`'s `paymentMiddleware` in front of the skill backend; its
 * facilitator is `@x402/core`'s `x402Facilitator` with `@x402/evm`'s `exact` scheme, run in the same process
 * (no HTTP hop to a hosted one) with a viem wallet on the local chain, so every paid call is verified, then
 * settled on-chain (one `transferWithAuthorization` from the payer straight to the seller's `payTo`) before
 * its answer is released. The client is `@x402/fetch` with the `exact` EVM client scheme and a viem account.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import type { Network, SupportedResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import {
  type Abi,
  type Address,
  type Hash,
  type Hex,
  type LocalAccount,
  concatHex,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  http as httpTransport,
  publicActions,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { localChain } from "../../server/devstack/local-node";

export type StartX402PeerParameters = {
  rpcUrl: string;
  /** The token paid in: it must implement EIP-3009 (USDC, or the local chain's TestUSDC). */
  usdc: Address;
  /** The seller's own address: x402 pays it directly. */
  payTo: Address;
  /** The price of one call, in the token's base units. */
  priceMicros: bigint;
  /** The facilitator's key: it sends every settlement transaction and pays their gas. */
  facilitatorKey: Hex;
  /** The backend every paid POST /echo is forwarded to. */
  backendUrl: string;
};

export type X402Peer = {
  /** POST `${url}/echo` is the paid route. */
  url: string;
  network: Network;
  facilitatorAddress: Address;
  close(): Promise<void>;
};

/** Runs the functions it is given one after another, each once the previous one has settled. */
function serially(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
}

/**
 * Starts the peer on a free port of 127.0.0.1. The token's EIP-712 name and version, which the client signs
 * over and the facilitator checks, are read from the token itself (EIP-5267).
 */
export async function startX402Peer(parameters: StartX402PeerParameters): Promise<X402Peer> {
  const { rpcUrl, usdc, payTo, priceMicros, facilitatorKey, backendUrl } = parameters;
  const publicClient = createPublicClient({ transport: httpTransport(rpcUrl, { retryCount: 0 }) });
  const chain = localChain(rpcUrl, await publicClient.getChainId());
  const network = `eip155:${chain.id}` as Network;
  const { domain } = await publicClient.getEip712Domain({ address: usdc });

  // The facilitator: one key on the local chain, and the signer a facilitator that cares for throughput would
  // give it. Hardhat's automine mines each transaction as it arrives and refuses one whose nonce is ahead of
  // the account's (it cannot hold a gap as a mempool would), so transactions must reach it in nonce order:
  // their gas and fees are worked out concurrently, and only the signing with the next nonce and the send are
  // taken one at a time. Verification, simulation and the wait for receipts all run concurrently. A short
  // polling interval: a receipt is there as soon as the transaction is mined, which here is at once.
  const account = privateKeyToAccount(facilitatorKey);
  const wallet = createWalletClient({ account, chain, transport: httpTransport(rpcUrl, { retryCount: 0 }), pollingInterval: 50 }).extend(
    publicActions,
  );
  const inNonceOrder = serially();
  let nextNonce: number | undefined;
  const send = async (to: Address, data: Hex, gas?: bigint): Promise<Hash> => {
    const [gasLimit, fees] = await Promise.all([gas ?? wallet.estimateGas({ account, to, data }), wallet.estimateFeesPerGas()]);
    return inNonceOrder(async () => {
      nextNonce ??= await wallet.getTransactionCount({ address: account.address, blockTag: "pending" });
      const serializedTransaction = await account.signTransaction({
        chainId: chain.id,
        type: "eip1559",
        to,
        data,
        gas: gasLimit,
        ...fees,
        nonce: nextNonce,
      });
      try {
        const hash = await wallet.sendRawTransaction({ serializedTransaction });
        nextNonce++;
        return hash;
      } catch (error) {
        // Whether the nonce was used is unknown: the next send asks the chain.
        nextNonce = undefined;
        throw error;
      }
    });
  };
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    getCode: (args) => wallet.getCode(args),
    readContract: (args) => wallet.readContract({ ...args, args: args.args ?? [] } as Parameters<typeof wallet.readContract>[0]),
    verifyTypedData: (args) => wallet.verifyTypedData(args as Parameters<typeof wallet.verifyTypedData>[0]),
    writeContract: ({ address, abi, functionName, args, gas, dataSuffix }) => {
      const data = encodeFunctionData({ abi: abi as Abi, functionName, args });
      return send(address, dataSuffix ? concatHex([data, dataSuffix]) : data, gas);
    },
    sendTransaction: ({ to, data }) => send(to, data),
    waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt(args),
  });
  const facilitator = new x402Facilitator().register(network, new ExactEvmFacilitatorScheme(signer));
  // In-process: the resource server calls the facilitator's methods directly instead of over HTTP.
  const facilitatorClient: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
  const resourceServer = new x402ResourceServer(facilitatorClient).register(network, new ExactEvmServerScheme());

  const backend = new URL(backendUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const app = express();
  app.use(
    paymentMiddleware(
      {
        "POST /echo": {
          accepts: {
            scheme: "exact",
            network,
            payTo,
            // No maxTimeoutSeconds: the authorization's validity window is x402's default.
            price: { amount: priceMicros.toString(), asset: usdc, extra: { name: domain.name, version: domain.version } },
          },
          description: "echo",
          mimeType: "application/json",
        },
      },
      resourceServer,
    ),
  );
  // The handler forwards the body to the backend and answers with the backend's. The middleware holds the
  // answer back until the payment has settled, and settles nothing when the status is 400 or above.
  app.post("/echo", (req, res) => {
    const upstream = http.request(
      {
        host: backend.hostname,
        port: backend.port,
        path: backend.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": req.headers["content-length"] ?? "0" },
      },
      (up) => {
        const chunks: Buffer[] = [];
        up.on("data", (c: Buffer) => chunks.push(c));
        up.on("end", () =>
          res
            .status(up.statusCode ?? 502)
            .type("application/json")
            .send(Buffer.concat(chunks)),
        );
        up.on("error", () => res.status(502).end());
      },
    );
    upstream.on("error", () => res.status(502).end());
    req.pipe(upstream);
  });

  const server = http.createServer(app);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    network,
    facilitatorAddress: account.address,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}

export type X402FetchParameters = {
  /** The one token this buyer pays in, on its network (`eip155:<chain id>`), and the most it pays per call. */
  allow: { network: Network; asset: Address; maxAmountPerPaymentMicros: bigint };
  fetch?: typeof fetch;
};

/**
 * `fetch` that pays x402 `exact` (EIP-3009) requirements from `account`, as a buyer sets up `@x402/fetch`: a
 * 402 is answered by signing an authorization for the amount asked (a fresh random nonce each time) and sending
 * the request again with it in `PAYMENT-SIGNATURE`. The client's spend controls accept only the tokens it knows
 * (mainnet USDC and the like) unless told otherwise: here, the one token of `allow`, capped per payment.
 */
export function x402Fetch(account: LocalAccount, parameters: X402FetchParameters): typeof fetch {
  const { network, asset, maxAmountPerPaymentMicros } = parameters.allow;
  const client = new x402Client()
    .register("eip155:*", new ExactEvmClientScheme(account))
    .setSpendControls({ allowedAssets: [{ network, asset, maxAmountPerPayment: maxAmountPerPaymentMicros.toString() }] });
  return wrapFetchWithPayment(parameters.fetch ?? fetch, client);
}
