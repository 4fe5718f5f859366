import net from "node:net";
import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";

/** Opens a raw connection to the stack, writes `head`, and resolves with what the server sent before it closed the socket. */
function slowClient(stack: TestStack, head: string, deadlineMs = 15_000): Promise<{ text: string; closedByServer: boolean }> {
  const { port } = new URL(stack.url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), "127.0.0.1", () => socket.write(head));
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedByServer: false });
    }, deadlineMs);
    socket.on("data", (chunk) => (text += chunk.toString()));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
  });
}

describe("the gateway's HTTP transport", () => {
  let stack: TestStack;
  const logged: Array<{ message: string; error?: unknown }> = [];
  beforeEach(async () => {
    logged.length = 0;
    stack = await startStack({
      config: { headersTimeoutMs: 500, requestTimeoutMs: 1_000 },
      gateway: { log: (message: string, error?: unknown) => logged.push({ message, error }) },
    });
  });
  afterEach(() => stack.close());

  it("refuses a client that never finishes its headers (408, connection closed)", async function () {
    this.timeout(20_000);
    const reply = await slowClient(stack, "POST /v1/call HTTP/1.1\r\nHost: x\r\n");
    expect(reply.closedByServer, "the server kept the slow client").to.equal(true);
    expect(reply.text).to.match(/^HTTP\/1\.1 408/);
  });

  it("refuses a client that never finishes its body (408, connection closed), uncharged", async function () {
    this.timeout(20_000);
    const before = await stack.available();
    const reply = await slowClient(
      stack,
      `POST /v1/call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${stack.key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"skill_id":`,
    );
    expect(reply.closedByServer, "the server kept the slow client").to.equal(true);
    expect(reply.text).to.match(/^HTTP\/1\.1 408/);
    expect(await stack.available()).to.equal(before);
  });

  it("logs a client that hangs up mid-body as one line, not as an internal error with a stack", async () => {
    const { port } = new URL(stack.url);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), "127.0.0.1", () => {
        socket.write(
          `POST /v1/call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${stack.key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"skill_id":`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
    });
    for (let i = 0; i < 50 && logged.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(logged).to.have.length(1);
    expect(logged[0].message).to.match(/^client closed the connection before its request body was complete/);
    expect(logged[0].error).to.equal(undefined);
  });
});

describe("the call path's request target", () => {
  it("serves a call whose request line is in absolute form (http://host/path), as HTTP/1.1 requires", async () => {
    const stack = await startStack();
    try {
      const { port } = new URL(stack.url);
      const body = JSON.stringify({ text: "hi" });
      const reply = await new Promise<string>((resolve) => {
        const socket = net.connect(Number(port), "127.0.0.1", () =>
          socket.write(
            `POST http://127.0.0.1:${port}/v1/skills/echo/call HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${stack.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
          ),
        );
        let text = "";
        socket.on("data", (chunk) => (text += chunk.toString()));
        socket.on("close", () => resolve(text));
      });
      expect(reply).to.match(/^HTTP\/1\.1 200/);
      expect(reply).to.include('"data":{"text":"hi"}');
    } finally {
      await stack.close();
    }
  });
});
