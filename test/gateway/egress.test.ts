import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { type BackendOwner, EgressPolicy, EgressRefused, isPublicAddress } from "../../server/gateway/egress";

const policy = (
  allowlist: string[] = [],
  allowedPorts: number[] = [],
  resolve?: (host: string) => Promise<{ address: string; family: number }[]>,
) => new EgressPolicy({ allowlist, allowedPorts }, resolve);

describe("the egress policy (which skill backends the gateway may reach)", () => {
  describe("isPublicAddress", () => {
    const refused: [string, string][] = [
      ["IPv4 loopback", "127.0.0.1"],
      ["the rest of 127/8", "127.255.0.9"],
      ["the unspecified address", "0.0.0.0"],
      ["the rest of 0/8", "0.1.2.3"],
      ["10/8", "10.0.0.1"],
      ["172.16/12", "172.31.255.254"],
      ["192.168/16", "192.168.1.1"],
      ["link-local (cloud metadata)", "169.254.169.254"],
      ["carrier-grade NAT", "100.64.0.1"],
      ["multicast", "224.0.0.1"],
      ["broadcast", "255.255.255.255"],
      ["reserved 240/4", "240.0.0.1"],
      ["documentation TEST-NET-1", "192.0.2.10"],
      ["benchmarking 198.18/15", "198.18.0.1"],
      ["IPv6 loopback", "::1"],
      ["IPv6 unspecified", "::"],
      ["IPv6 link-local", "fe80::1"],
      ["IPv6 unique-local", "fd12:3456::1"],
      ["IPv6 multicast", "ff02::1"],
      ["IPv4-mapped loopback", "::ffff:127.0.0.1"],
      ["IPv4-mapped loopback, hex form", "::ffff:7f00:1"],
      ["IPv4-mapped public address (mapped forms are refused outright)", "::ffff:8.8.8.8"],
      ["IPv4-compatible loopback", "::127.0.0.1"],
      ["IPv4-compatible loopback, hex form (ipaddr.js calls it unicast)", "::7f00:1"],
      ["IPv4-compatible link-local", "::a9fe:a9fe"],
      ["IPv6 outside global unicast", "4000::1"],
      ["NAT64 of loopback", "64:ff9b::7f00:1"],
      ["6to4 of loopback", "2002:7f00:1::"],
      ["Teredo", "2001::1"],
      ["IPv6 documentation", "2001:db8::1"],
      ["a bracketed IPv6 loopback", "[::1]"],
      ["an address with a zone", "fe80::1%eth0"],
      ["not an address", "example.com"],
    ];
    for (const [what, address] of refused) {
      it(`refuses ${what} (${address})`, () => expect(isPublicAddress(address)).to.equal(false));
    }
    for (const address of ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "[2a00:1450:4001::200e]"]) {
      it(`accepts the public address ${address}`, () => expect(isPublicAddress(address)).to.equal(true));
    }
  });

  describe("checkUrl: what the URL alone tells", () => {
    const refused: [string, string, string][] = [
      ["loopback", "http://127.0.0.1:8545/", "address"],
      ["loopback as a decimal number", "http://2130706433:8545/", "address"],
      ["loopback in hex", "http://0x7f000001/", "address"],
      ["loopback in dotted hex", "http://0x7f.0x0.0x0.0x1/", "address"],
      ["loopback in octal", "http://0177.0.0.1/", "address"],
      ["loopback in short form", "http://127.1/", "address"],
      ["the unspecified address", "http://0.0.0.0:8545/", "address"],
      ["the unspecified address, short", "http://0/", "address"],
      ["cloud metadata", "http://169.254.169.254/latest/meta-data/", "address"],
      ["a private address", "http://10.0.0.1/", "address"],
      ["IPv6 loopback", "http://[::1]:8545/", "address"],
      ["IPv4-mapped IPv6 loopback", "http://[::ffff:127.0.0.1]/", "address"],
      ["localhost", "http://localhost:8545/", "address"],
      ["a name under .localhost", "http://gateway.localhost/", "address"],
      ["a single-label name", "http://metadata/", "address"],
      ["a .internal name", "http://metadata.google.internal/", "address"],
      ["a file URL", "file:///etc/passwd", "scheme"],
      ["a gopher URL", "gopher://example.com/", "scheme"],
      ["credentials in the URL", "https://user:secret@skills.example.com/", "credentials"],
      ["a user name alone", "https://user@skills.example.com/", "credentials"],
      ["not a URL", "skills.example.com/echo", "invalid_url"],
    ];
    for (const [what, url, reason] of refused) {
      it(`refuses ${what}: ${url}`, () => {
        const checked = policy().checkUrl(url, "seller");
        expect(checked.ok).to.equal(false);
        if (!checked.ok) expect(checked.reason).to.equal(reason);
      });
    }

    it("accepts a public https backend", () => expect(policy().checkUrl("https://skills.example.com/echo", "seller").ok).to.equal(true));

    it("accepts a public IPv6 literal, and refuses an IPv4-compatible one as an address", () => {
      expect(policy().checkUrl("http://[2606:4700:4700::1111]/echo", "seller").ok).to.equal(true);
      expect(policy().checkUrl("http://[::7f00:1]/echo", "seller")).to.deep.include({ ok: false, reason: "address" });
    });

    it("refuses a port the operator did not allow, and accepts the default port when 443 is allowed", () => {
      const p = policy([], [443]);
      const checked = p.checkUrl("https://skills.example.com:8443/echo", "seller");
      expect(checked).to.deep.include({ ok: false, reason: "port" });
      expect(p.checkUrl("https://skills.example.com/echo", "seller").ok).to.equal(true);
      expect(p.checkUrl("http://skills.example.com/echo", "seller")).to.deep.include({ ok: false, reason: "port" });
    });

    it("refuses this machine's own public addresses, in any spelling, as it refuses loopback", () => {
      const p = new EgressPolicy({ allowlist: [], allowedPorts: [] }, undefined, ["93.184.216.34", "2606:4700:4700::1111"]);
      expect(p.checkUrl("http://93.184.216.34:8787/", "seller")).to.deep.include({ ok: false, reason: "address" });
      expect(p.checkUrl("http://1572395042:8787/", "seller")).to.deep.include({ ok: false, reason: "address" });
      expect(p.checkUrl("http://[2606:4700:4700:0::1111]/", "seller")).to.deep.include({ ok: false, reason: "address" });
      expect(p.checkUrl("http://93.184.216.35/", "seller").ok).to.equal(true);
    });

    it("lets the operator's skill through an allowlisted origin, and only that exact origin", () => {
      const p = policy(["http://127.0.0.1:9100"]);
      expect(p.checkUrl("http://127.0.0.1:9100/demo", "operator")).to.deep.include({ ok: true, allowlisted: true });
      expect(p.checkUrl("http://127.0.0.1:9101/demo", "operator").ok).to.equal(false);
      expect(p.checkUrl("https://127.0.0.1:9100/demo", "operator").ok).to.equal(false);
      expect(p.checkUrl("http://localhost:9100/demo", "operator").ok).to.equal(false);
      // The same origin spelled as a number is the same origin once parsed.
      expect(p.checkUrl("http://2130706433:9100/demo", "operator").ok).to.equal(true);
    });

    it("holds a seller's backend on an allowlisted origin to the public-address rule, in every spelling", () => {
      const p = policy(["http://127.0.0.1:9100"]);
      for (const url of ["http://127.0.0.1:9100/demo", "http://127.0.0.1:9100/admin/secret", "http://2130706433:9100/"]) {
        expect(p.checkUrl(url, "seller"), url).to.deep.include({ ok: false, reason: "address" });
      }
    });
  });

  describe("checkListing: the addresses a name resolves to now", () => {
    const resolvingTo =
      (...addresses: string[]) =>
      async () =>
        addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

    it("refuses a name that resolves to loopback", async () => {
      const checked = await policy([], [], resolvingTo("127.0.0.1")).checkListing("https://rebind.example.com/x", "seller");
      expect(checked).to.deep.include({ ok: false, reason: "address" });
      // The category only: the answer must not tell a seller what internal names resolve to.
      if (!checked.ok) expect(checked.message).to.include("resolves to a loopback address").and.not.include("127.0.0.1");
    });

    it("refuses a name with one public and one private address", async () => {
      expect(
        await policy([], [], resolvingTo("8.8.8.8", "10.0.0.5")).checkListing("https://mixed.example.com/x", "seller"),
      ).to.deep.include({
        ok: false,
        reason: "address",
      });
    });

    it("refuses a name that does not resolve", async () => {
      const failing = async () => {
        throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
      };
      expect(await policy([], [], failing).checkListing("https://nowhere.example.com/x", "seller")).to.deep.include({
        ok: false,
        reason: "unresolvable",
      });
    });

    it("refuses a name that resolves to this machine's own public address", async () => {
      const p = new EgressPolicy({ allowlist: [], allowedPorts: [] }, resolvingTo("93.184.216.34"), ["93.184.216.34"]);
      const checked = await p.checkListing("https://self.example.com/x", "seller");
      expect(checked).to.deep.include({ ok: false, reason: "address" });
      if (!checked.ok) expect(checked.message).to.include("this gateway's own machine");
    });

    it("resolves nothing for the operator's allowlisted origin, and refuses a seller's listing there", async () => {
      let lookups = 0;
      const counting = async () => {
        lookups++;
        return [{ address: "10.0.0.5", family: 4 }];
      };
      const p = policy(["http://skills.internal.example:9100"], [], counting);
      expect(await p.checkListing("http://skills.internal.example:9100/x", "operator")).to.deep.include({ ok: true, allowlisted: true });
      expect(lookups).to.equal(0);
      expect(await p.checkListing("http://skills.internal.example:9100/x", "seller")).to.deep.include({ ok: false, reason: "address" });
    });

    it("accepts a name whose every address is public", async () => {
      expect(
        (await policy([], [], resolvingTo("8.8.8.8", "2606:4700:4700::1111")).checkListing("https://ok.example.com/x", "seller")).ok,
      ).to.equal(true);
    });
  });

  describe("connector: every connection, at call time", () => {
    let server: http.Server;
    let port: number;
    let requests = 0;
    before(async () => {
      server = http.createServer((_req, res) => {
        requests++;
        res.end("{}");
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      port = (server.address() as AddressInfo).port;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    const connect = (p: EgressPolicy, hostname: string, owner: BackendOwner = "seller") =>
      new Promise<unknown>((resolve) => {
        p.connector(`http://${hostname}:${port}`, owner)(
          {
            hostname,
            host: `${hostname}:${port}`,
            protocol: "http:",
            port: String(port),
            servername: undefined,
            localAddress: null,
            httpSocket: undefined,
          },
          (error, socket) => {
            socket?.destroy();
            resolve(error);
          },
        );
      });

    it("refuses a socket whose peer is loopback, even when no lookup ran (an IP literal)", async () => {
      expect(await connect(policy(), "127.0.0.1")).to.be.instanceOf(EgressRefused);
      expect(requests).to.equal(0);
    });

    it("refuses a name that re-resolves to loopback at call time, before connecting", async () => {
      let answers = 0;
      const rebinding = async () => [{ address: answers++ === 0 ? "93.184.216.34" : "127.0.0.1", family: 4 }];
      const p = policy([], [], rebinding);
      expect((await p.checkListing(`http://rebind.example.com:${port}/`, "seller")).ok).to.equal(true);
      expect(await connect(p, "rebind.example.com")).to.be.instanceOf(EgressRefused);
      expect(requests).to.equal(0);
    });

    it("connects the operator's skills to an allowlisted origin on loopback", async () => {
      expect(await connect(policy([`http://127.0.0.1:${port}`]), "127.0.0.1", "operator")).to.equal(null);
    });

    it("refuses a seller's connection to that same allowlisted origin, before a byte is written", async () => {
      const before = requests;
      expect(await connect(policy([`http://127.0.0.1:${port}`]), "127.0.0.1", "seller")).to.be.instanceOf(EgressRefused);
      expect(requests).to.equal(before);
    });
  });
});
