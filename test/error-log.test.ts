import net from "node:net";
import { Writable } from "node:stream";
import { expect } from "chai";
import pino from "pino";
import { createPublicClient, http } from "viem";
import { skillEscrowAbi } from "../server/chain/abi";
import { loggedError, loggedErrorText } from "../server/error-log";
import { createLogger, logFunction } from "../server/ops/log";

/** A port nothing listens on: a chain node that went away. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** What viem throws when the settler reads the escrow and the node is gone: a real ContractFunctionExecutionError. */
async function contractErrorOfAStoppedNode(): Promise<Error> {
  const client = createPublicClient({ transport: http(`http://127.0.0.1:${await closedPort()}`, { retryCount: 0 }) });
  try {
    await client.readContract({ address: "0x5FbDB2315678afecb367f032d93F642f64180aa3", abi: skillEscrowAbi, functionName: "minDeposit" });
  } catch (error) {
    return error as Error;
  }
  throw new Error("the read succeeded with no node");
}

/** The lines a logger over logFunction writes for one error. */
function logLines(message: string, error: unknown): string[] {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split("\n").filter(Boolean));
      done();
    },
  });
  const logger = createLogger({ level: "info", destination: destination as unknown as pino.DestinationStream });
  logFunction(logger)(message, error);
  logger.flush?.();
  return lines;
}

describe("a caught error in a log line (server/error-log.ts)", () => {
  let error: Error;
  before(async () => {
    error = await contractErrorOfAStoppedNode();
  });

  it("is viem's ContractFunctionExecutionError, whose whole serialization is the 15 KB line it replaces", () => {
    expect(error.name).to.equal("ContractFunctionExecutionError");
    expect(JSON.stringify(pino.stdSerializers.err(error)).length).to.be.greaterThan(10_000);
  });

  it("keeps a settler's line under 2 KB: the short message, the contract function and the cause chain", () => {
    const [line, ...more] = logLines("[settler] settlement step failed (3 in a row), retrying in 4000 ms", error);
    expect(more).to.deep.equal([]);
    expect(line.length, line).to.be.lessThan(2_000);
    const logged = JSON.parse(line) as { level: number; msg: string; error: ReturnType<typeof loggedError> };
    expect(logged.level).to.equal(50);
    expect(logged.error.type).to.equal("ContractFunctionExecutionError");
    expect(logged.error.function).to.equal("minDeposit");
    expect(logged.error.message).to.match(/^HTTP request failed\.?$/);
    expect(logged.error.causes.join("; ")).to.match(/HttpRequestError: HTTP request failed/);
    expect(line).to.not.include("stateMutability");
  });

  it("writes the same on one line for a console log", () => {
    const text = loggedErrorText(error);
    expect(text.length).to.be.lessThan(600);
    expect(text).to.match(
      /^ContractFunctionExecutionError in minDeposit of 0x5FbDB2315678afecb367f032d93F642f64180aa3: HTTP request failed/,
    );
    expect(text).to.include("caused by HttpRequestError");
  });

  it("follows a chain of causes to its end, a cycle or five causes, and summarizes what is not an Error", () => {
    const root = new Error("connect ECONNREFUSED 127.0.0.1:8545");
    const outer = new Error("batch failed", { cause: new Error("estimate failed", { cause: root }) });
    expect(loggedError(outer).causes).to.deep.equal(["Error: estimate failed", "Error: connect ECONNREFUSED 127.0.0.1:8545"]);
    const cyclic = new Error("a");
    cyclic.cause = new Error("b", { cause: cyclic });
    expect(loggedError(cyclic).causes).to.deep.equal(["Error: b"]);
    let deep = new Error("0");
    for (let i = 1; i < 20; i++) deep = new Error(String(i), { cause: deep });
    expect(loggedError(deep).causes).to.have.length(5);
    expect(loggedError("x".repeat(10_000)).message.length).to.be.lessThan(400);
  });
});
