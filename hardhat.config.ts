import { extendProvider, subtask } from "hardhat/config";
import { TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD } from "hardhat/builtin-tasks/task-names";
import type { HardhatUserConfig } from "hardhat/config";
import "@nomicfoundation/hardhat-viem";

const SOLC_VERSION = "0.8.28";

/** Base mainnet's chain id: the local chain uses it so the same code runs against Base. */
const CHAIN_ID = 8453;

/**
 * Fork settings, read here and nowhere else. FORK_URL: an RPC endpoint of a real L2 (e.g. Base) to fork;
 * unset means a fresh local chain. FORK_BLOCK: optional block number to pin the fork to (reproducible runs).
 */
const FORK_URL = process.env.FORK_URL ?? "";
const FORK_BLOCK = process.env.FORK_BLOCK ? Number(process.env.FORK_BLOCK) : undefined;
if (FORK_BLOCK !== undefined && !Number.isSafeInteger(FORK_BLOCK)) {
  throw new Error(`FORK_BLOCK must be an integer block number, got ${process.env.FORK_BLOCK}`);
}

/**
 * SAME_SECOND_BLOCKS=1: blocks mined within one second share its timestamp, as a real chain's blocks follow the
 * wall clock. By default each block takes a later second than the last, so a node that mines hundreds of
 * blocks a second (one per transaction, under automine) runs its clock minutes ahead of the wall clock, and
 * an authorization signed to be valid for the next few minutes of wall-clock time has expired on it. The
 * x402 benchmark (scripts/bench-x402.ts) starts its node with it.
 */
const SAME_SECOND_BLOCKS = process.env.SAME_SECOND_BLOCKS === "1";

// Hardhat cannot download compilers on these machines, so compile with the solc-js
// build shipped in the `solc` npm package (pinned to SOLC_VERSION in package.json).
subtask(TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD, async (args: { solcVersion: string }, _hre, runSuper) => {
  if (args.solcVersion !== SOLC_VERSION) return runSuper();
  const solc = require("solc");
  return {
    compilerPath: require.resolve("solc/soljson.js"),
    isSolcJs: true,
    version: args.solcVersion,
    longVersion: solc.version(),
  };
});

// A forked chain answers calls at the forked block with "No known hardfork for execution on historical block"
// unless Hardhat knows the remote chain's hardfork history, and it knows none for Base. The documented fix, a
// `chains: { 8453: { hardforkHistory } }` entry, has no effect with Hardhat 2.29.1 + EDR 0.12.0-next.23 (Hardhat
// hands the history to EDR as `hardforks`, EDR reads `hardforkActivationOverrides`). So mine one local block as
// soon as the forked network starts: `latest` is then a local block, run with the local hardfork, and the forked
// state is unchanged (the workaround given in NomicFoundation/hardhat#5511).
extendProvider(async (provider, _config, network) => {
  if (network === "hardhat" && FORK_URL) await provider.request({ method: "hardhat_mine", params: ["0x1"] });
  return provider;
});

const config: HardhatUserConfig = {
  solidity: {
    version: SOLC_VERSION,
    settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "cancun" },
  },
  networks: {
    hardhat: {
      chainId: CHAIN_ID,
      ...(SAME_SECOND_BLOCKS ? { allowBlocksWithSameTimestamp: true } : {}),
      ...(FORK_URL ? { forking: { url: FORK_URL, enabled: true, ...(FORK_BLOCK !== undefined ? { blockNumber: FORK_BLOCK } : {}) } } : {}),
    },
    localhost: { url: "http://127.0.0.1:8545", chainId: CHAIN_ID },
  },
  paths: { tests: "./test/contracts" },
};

export default config;
