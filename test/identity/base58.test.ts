import { expect } from "chai";
import fc from "fast-check";
import { base58Encode, isBase58 } from "../../server/identity/base58";
import { base58Decode } from "./base58-reference";

const hex = (text: string) => Uint8Array.from(Buffer.from(text, "hex"));

describe("base58", () => {
  describe("base58Encode", () => {
    // Vectors from Bitcoin Core's base58_encode_decode.json: the alphabet and the
    // leading-zero rule must match the one every other base58 tool uses.
    const vectors: [string, string][] = [
      ["", ""],
      ["61", "2g"],
      ["626262", "a3gV"],
      ["636363", "aPEr"],
      ["73696d706c792061206c6f6e6720737472696e67", "2cFupjhnEsSn59qHXstmK2ffpLv2"],
      ["00eb15231dfceb60925886b67d065299925915aeb172c06647", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L"],
      ["516b6fcd0f", "ABnLTmg"],
      ["bf4f89001e670274dd", "3SEo3LWLoPntC"],
      ["572e4794", "3EFU7m"],
      ["ecac89cad93923c02321", "EJDM8drfXA6uyA"],
      ["10c8511e", "Rt5zm"],
      ["00000000000000000000", "1111111111"],
    ];
    for (const [bytes, encoded] of vectors) {
      it(`encodes 0x${bytes || "(empty)"} as "${encoded}"`, () => {
        expect(base58Encode(hex(bytes))).to.equal(encoded);
      });
    }

    it("keeps every leading zero byte as a leading '1', so no byte of a secret is lost", () => {
      expect(base58Encode(Uint8Array.from([0, 0, 0, 1]))).to.equal("1112");
      expect(base58Encode(new Uint8Array(32))).to.equal("1".repeat(32));
    });

    it("round-trips any 32 bytes through an independent decoder, in 32 to 44 characters", () => {
      fc.assert(
        fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
          const encoded = base58Encode(bytes);
          expect(encoded.length).to.be.within(32, 44);
          expect(isBase58(encoded)).to.equal(true);
          expect(base58Decode(encoded)).to.deep.equal(bytes);
        }),
        { seed: 0x58, numRuns: 500 },
      );
    });
  });

  describe("isBase58", () => {
    it("accepts the whole alphabet", () => {
      expect(isBase58("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")).to.equal(true);
    });

    for (const ch of ["0", "O", "I", "l", "_", "+", "/", "=", " ", "é"]) {
      it(`rejects "${ch}", which is not in the alphabet`, () => {
        expect(isBase58(`abc${ch}def`)).to.equal(false);
      });
    }
  });
});
