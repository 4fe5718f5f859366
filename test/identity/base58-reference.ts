const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/**
 * An independent base58 decoder, written for the tests only, so that the encoder is
 * checked against a second implementation rather than against itself.
 */
export function base58Decode(text: string): Uint8Array {
  let value = 0n;
  for (const ch of text) {
    const digit = ALPHABET.indexOf(ch);
    if (digit < 0) throw new RangeError(`not a base58 character: "${ch}"`);
    value = value * 58n + BigInt(digit);
  }
  const body: number[] = [];
  while (value > 0n) {
    body.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  const leadingOnes = /^1*/.exec(text)![0].length;
  return Uint8Array.from([...new Array<number>(leadingOnes).fill(0), ...body]);
}
