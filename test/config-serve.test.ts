import { expect } from "chai";
import { ConfigError, loadServeConfig } from "../server/config";

/** What `npm run serve` needs at the least: a chain, its deployment, and the two role keys. */
const MINIMAL = {
  CHAIN_RPC_URL: "https://base.example/rpc",
  DEPLOYMENT_FILE: "/etc/skill-gateway/base.json",
  SETTLER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  VOUCHER_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
};
const WALLETS = {
  BUNDLER_URL: "https://bundler.example/rpc",
  PAYMASTER_SIGNER_PRIVATE_KEY: `0x${"44".repeat(32)}`,
  WALLET_ENCRYPTION_KEY: "33".repeat(32),
};

describe("loadServeConfig (the settings of npm run serve)", () => {
  it("takes a chain, its deployment file and the settler and voucher-signer keys, with embedded wallets off", () => {
    const config = loadServeConfig(MINIMAL);
    expect(config).to.include({
      chainRpcUrl: "https://base.example/rpc",
      deploymentFile: "/etc/skill-gateway/base.json",
      settlerPrivateKey: MINIMAL.SETTLER_PRIVATE_KEY,
      voucherSignerPrivateKey: MINIMAL.VOUCHER_SIGNER_PRIVATE_KEY,
      bundlerUrl: "",
      paymasterSignerPrivateKey: "",
      // A real chain reorgs: deposits wait for confirmations unless told otherwise.
      depositConfirmations: 12,
    });
  });

  it("takes the bundler, the paymaster's key and the wallet encryption key together for embedded wallets", () => {
    const config = loadServeConfig({
      ...MINIMAL,
      ...WALLETS,
      FUNDING_PRIVATE_KEY: `0x${"55".repeat(32)}`,
      WALLET_SWEEP_INTERVAL_MS: "5000",
    });
    expect(config).to.include({
      bundlerUrl: "https://bundler.example/rpc",
      paymasterSignerPrivateKey: WALLETS.PAYMASTER_SIGNER_PRIVATE_KEY,
      walletEncryptionKey: WALLETS.WALLET_ENCRYPTION_KEY,
      fundingPrivateKey: `0x${"55".repeat(32)}`,
      walletSweepIntervalMs: 5_000,
    });
  });

  const without = (env: Record<string, string>, name: string) => Object.fromEntries(Object.entries(env).filter(([key]) => key !== name));
  const refused: [string, Record<string, string>, string][] = [
    ["no CHAIN_RPC_URL (serve never starts a chain)", without(MINIMAL, "CHAIN_RPC_URL"), "CHAIN_RPC_URL is required by npm run serve"],
    ["a CHAIN_RPC_URL that is no URL", { ...MINIMAL, CHAIN_RPC_URL: "base-rpc" }, 'CHAIN_RPC_URL must be a URL, got "base-rpc"'],
    ["a websocket CHAIN_RPC_URL", { ...MINIMAL, CHAIN_RPC_URL: "wss://base.example" }, "CHAIN_RPC_URL must be a https: or http: URL"],
    ["no DEPLOYMENT_FILE (the demo's default is no production file)", without(MINIMAL, "DEPLOYMENT_FILE"), "DEPLOYMENT_FILE is required"],
    ["no SETTLER_PRIVATE_KEY", without(MINIMAL, "SETTLER_PRIVATE_KEY"), "SETTLER_PRIVATE_KEY is required by npm run serve"],
    [
      "a malformed SETTLER_PRIVATE_KEY",
      { ...MINIMAL, SETTLER_PRIVATE_KEY: "0x1234" },
      "SETTLER_PRIVATE_KEY must be 0x followed by 64 hex digits",
    ],
    ["no VOUCHER_SIGNER_PRIVATE_KEY", without(MINIMAL, "VOUCHER_SIGNER_PRIVATE_KEY"), "VOUCHER_SIGNER_PRIVATE_KEY is required"],
    [
      "a bundler without the paymaster's key",
      { ...MINIMAL, ...without(WALLETS, "PAYMASTER_SIGNER_PRIVATE_KEY") },
      "PAYMASTER_SIGNER_PRIVATE_KEY is required",
    ],
    ["the paymaster's key without a bundler", { ...MINIMAL, ...without(WALLETS, "BUNDLER_URL") }, "BUNDLER_URL is required"],
    [
      "embedded wallets without WALLET_ENCRYPTION_KEY",
      { ...MINIMAL, ...without(WALLETS, "WALLET_ENCRYPTION_KEY") },
      "WALLET_ENCRYPTION_KEY is required",
    ],
    [
      "a malformed PAYMASTER_SIGNER_PRIVATE_KEY",
      { ...MINIMAL, ...WALLETS, PAYMASTER_SIGNER_PRIVATE_KEY: "44".repeat(32) },
      "PAYMASTER_SIGNER_PRIVATE_KEY must be 0x",
    ],
    [
      "a BUNDLER_URL that is a file",
      { ...MINIMAL, ...WALLETS, BUNDLER_URL: "file:///tmp/bundler" },
      "BUNDLER_URL must be a https: or http: URL",
    ],
    [
      "a malformed FUNDING_PRIVATE_KEY",
      { ...MINIMAL, FUNDING_PRIVATE_KEY: "0xzz" },
      "FUNDING_PRIVATE_KEY must be 0x followed by 64 hex digits",
    ],
  ];
  for (const [what, env, message] of refused) {
    it(`refuses ${what}, naming the setting`, () => {
      expect(() => loadServeConfig(env))
        .to.throw(ConfigError)
        .with.property("message")
        .that.includes(message);
    });
  }
});
