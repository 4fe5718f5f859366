/**
 * The owner keys of server-owned embedded wallets, encrypted at rest: AES-256-GCM under WALLET_ENCRYPTION_KEY,
 * authenticated together with the account and the wallet address, so a ciphertext copied to another row does
 * not decrypt. A key is never logged and never returned by the API.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { Hex } from "viem";
import { WalletError } from "./wallet-error";

const KEY_FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** WALLET_ENCRYPTION_KEY (64 hex digits, 0x optional, or base64) as 32 bytes; a clear error when unset or wrong. */
export function walletEncryptionKey(configured: string | undefined): Buffer {
  const raw = (configured ?? "").trim();
  if (raw === "") {
    throw new WalletError(
      "WALLET_ENCRYPTION_KEY is not set: it encrypts the owner keys of e-mail and OAuth accounts' embedded wallets " +
        "(32 bytes as 64 hex digits or base64, e.g. `openssl rand -hex 32`)",
    );
  }
  const hex = raw.replace(/^0x/i, "");
  const key = /^[0-9a-fA-F]{64}$/.test(hex) ? Buffer.from(hex, "hex") : Buffer.from(raw, "base64");
  if (key.length !== 32) throw new WalletError("WALLET_ENCRYPTION_KEY must be 32 bytes: 64 hex digits or base64");
  return key;
}

function associatedData(accountId: string, wallet: string): Buffer {
  return Buffer.from(`skill-gateway embedded wallet v1\0${accountId}\0${wallet.toLowerCase()}`, "utf8");
}

/** `version (1) | iv (12) | tag (16) | ciphertext (32)`, authenticated together with the account and wallet. */
export function encryptOwnerKey(privateKey: Hex, key: Buffer, accountId: string, wallet: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(associatedData(accountId, wallet));
  const ciphertext = Buffer.concat([cipher.update(Buffer.from(privateKey.slice(2), "hex")), cipher.final()]);
  return Buffer.concat([Buffer.from([KEY_FORMAT_V1]), iv, cipher.getAuthTag(), ciphertext]);
}

export function decryptOwnerKey(blob: Buffer, key: Buffer, accountId: string, wallet: string): Hex {
  if (blob.length !== 1 + IV_BYTES + TAG_BYTES + 32 || blob[0] !== KEY_FORMAT_V1) {
    throw new WalletError(`the owner key of ${accountId}'s wallet is not in a known format`);
  }
  const iv = blob.subarray(1, 1 + IV_BYTES);
  const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv("aes-256-gcm", key, iv);
  decipher.setAAD(associatedData(accountId, wallet));
  decipher.setAuthTag(tag);
  try {
    const plain = Buffer.concat([decipher.update(blob.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
    return `0x${plain.toString("hex")}`;
  } catch {
    // Deliberately vague: never say more about a key than that it did not open.
    throw new WalletError(`the owner key of ${accountId}'s wallet does not decrypt with WALLET_ENCRYPTION_KEY`);
  }
}
