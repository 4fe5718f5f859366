/**
 * The browser wallet (an EIP-1193 provider at window.ethereum), for SIWE sign-in and for the
 * owner's signature on a SIWE wallet's claim, and for a claim sent from a payout address that
 * is the person's own wallet rather than their embedded one.
 */

interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

export const NO_WALLET = "No browser wallet found. Install a wallet extension such as MetaMask or Rabby, or sign in with e-mail.";

/** The injected provider, if the browser has one. */
export function provider(): Eip1193Provider | undefined {
  return (window as unknown as { ethereum?: Eip1193Provider }).ethereum;
}

/** Plain words for a wallet's error: a rejection says so; others keep their message. */
export function walletError(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e && e.code === 4001) return "The request was rejected in your wallet.";
  if (e && typeof e.message === "string" && e.message) return `Your wallet answered: ${e.message}`;
  return "Your wallet could not complete the request.";
}

/** Asks the wallet for its account (a connect prompt the first time). */
export async function requestAccount(): Promise<string> {
  const eth = provider();
  if (!eth) throw new Error(NO_WALLET);
  const accounts = (await eth.request({ method: "eth_requestAccounts" })) as unknown;
  if (!Array.isArray(accounts) || typeof accounts[0] !== "string") throw new Error("Your wallet shared no account.");
  return accounts[0];
}

/** Hex of a text's UTF-8 bytes: personal_sign takes data as hex. */
export function utf8Hex(text: string): string {
  return `0x${Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * personal_sign over `data`: a 0x hex string is signed as the raw bytes it encodes (a
 * UserOperation hash), text as its UTF-8 bytes (a SIWE message).
 */
export async function personalSign(data: string, address: string): Promise<string> {
  const eth = provider();
  if (!eth) throw new Error(NO_WALLET);
  const payload = /^0x[0-9a-fA-F]*$/.test(data) ? data : utf8Hex(data);
  const signature = await eth.request({ method: "personal_sign", params: [payload, address] });
  if (typeof signature !== "string") throw new Error("Your wallet returned no signature.");
  return signature;
}

/** Asks the wallet to send a transaction from `from`; returns its hash once the wallet has sent it. */
export async function sendTransaction(tx: { from: string; to: string; data: string }): Promise<string> {
  const eth = provider();
  if (!eth) throw new Error(NO_WALLET);
  const hash = await eth.request({ method: "eth_sendTransaction", params: [{ ...tx, value: "0x0" }] });
  if (typeof hash !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(hash)) throw new Error("Your wallet returned no transaction hash.");
  return hash;
}
