import hre from "hardhat";
import { expect } from "chai";
import { parseEventLogs, type Abi, type Hash } from "viem";

function normalize(value: unknown): unknown {
  if (typeof value === "string" && /^0x[0-9a-fA-F]{40}$/.test(value)) return value.toLowerCase();
  if (Array.isArray(value)) return value.map(normalize);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, normalize(item)]));
  }
  return value;
}

/** The decoded logs named `eventName` that `abi`'s contract at `address` emitted in transaction `hash`. */
export async function eventsIn(hash: Hash, abi: Abi, address: string, eventName: string) {
  const publicClient = await hre.viem.getPublicClient();
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  const logs = receipt.logs.filter((log) => log.address.toLowerCase() === address.toLowerCase());
  return parseEventLogs({ abi, logs, eventName }).map((log) => log.args as Record<string, unknown>);
}

/** Asserts that transaction `hash` emitted exactly the listed `eventName` events with these arguments, in order. */
export async function expectEvents(
  hash: Hash,
  contract: { abi: Abi; address: string },
  eventName: string,
  expected: Record<string, unknown>[],
): Promise<void> {
  const got = await eventsIn(hash, contract.abi, contract.address, eventName);
  expect(normalize(got), `${eventName} events`).to.deep.equal(normalize(expected));
}
