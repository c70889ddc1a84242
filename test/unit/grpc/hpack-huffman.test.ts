import fc from 'fast-check';
import {
  HUFFMAN_CODE_LENGTHS,
  HUFFMAN_CODES,
  HUFFMAN_EOS,
  huffmanDecode,
  huffmanDecodedLengthBound,
} from '../../../src/transport/http2/huffman';
import { hex, huffmanBits, huffmanEncode, packBits } from '../../support/hpack-encoding';

/** The decoded string, or undefined where huffmanDecode refuses the input. */
function decode(encoded: Buffer): string | undefined {
  const out = Buffer.alloc(huffmanDecodedLengthBound(encoded.length));
  const length = huffmanDecode(encoded, 0, encoded.length, out);
  return length < 0 ? undefined : out.toString('latin1', 0, length);
}

describe('HPACK Huffman code table (RFC 7541 Appendix B)', () => {
  it('has 257 codes of 5 to 30 bits, each fitting its length', () => {
    expect(HUFFMAN_CODES).toHaveLength(257);
    expect(HUFFMAN_CODE_LENGTHS).toHaveLength(257);
    HUFFMAN_CODES.forEach((code, symbol) => {
      const length = HUFFMAN_CODE_LENGTHS[symbol]!;
      expect(length).toBeGreaterThanOrEqual(5);
      expect(length).toBeLessThanOrEqual(30);
      expect(code).toBeLessThan(2 ** length);
    });
    expect(HUFFMAN_CODES[HUFFMAN_EOS]).toBe(0x3fffffff);
    expect(HUFFMAN_CODE_LENGTHS[HUFFMAN_EOS]).toBe(30);
  });

  // Appendix B's code is canonical: sorted by (length, symbol), each code is
  // the previous one plus one, shifted left by the growth in length. So the
  // lengths alone determine every code, and a typo in either column shows.
  it('is the canonical code of its lengths, and complete (Kraft sum 1)', () => {
    const symbols = [...HUFFMAN_CODE_LENGTHS.keys()].sort((a, b) => HUFFMAN_CODE_LENGTHS[a]! - HUFFMAN_CODE_LENGTHS[b]! || a - b);
    let code = 0;
    let previousLength = HUFFMAN_CODE_LENGTHS[symbols[0]!]!;
    let kraft = 0;
    symbols.forEach((symbol, i) => {
      const length = HUFFMAN_CODE_LENGTHS[symbol]!;
      if (i > 0) code = (code + 1) * 2 ** (length - previousLength);
      previousLength = length;
      expect([symbol, HUFFMAN_CODES[symbol]]).toEqual([symbol, code]);
      kraft += 2 ** -length;
    });
    expect(kraft).toBe(1);
  });
});

describe('huffmanDecode', () => {
  it('decodes the strings of RFC 7541 Appendix C.4 and C.6', () => {
    expect(decode(hex('f1e3 c2e5 f23a 6ba0 ab90 f4ff'))).toBe('www.example.com');
    expect(decode(hex('a8eb 1064 9cbf'))).toBe('no-cache');
    expect(decode(hex('25a8 49e9 5ba9 7d7f'))).toBe('custom-key');
    expect(decode(hex('25a8 49e9 5bb8 e8b4 bf'))).toBe('custom-value');
    expect(decode(hex('6402'))).toBe('302');
    expect(decode(hex('aec3 771a 4b'))).toBe('private');
    expect(decode(hex('d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff'))).toBe('Mon, 21 Oct 2013 20:13:21 GMT');
    expect(decode(hex('9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3'))).toBe('https://www.example.com');
    expect(decode(hex('9bd9 ab'))).toBe('gzip');
    expect(
      decode(hex('94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07')),
    ).toBe('foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1');
  });

  it('decodes every octet, alone and between others', () => {
    for (let octet = 0; octet < 256; octet += 1) {
      const text = String.fromCharCode(octet);
      expect(decode(huffmanEncode(text))).toBe(text);
      expect(decode(huffmanEncode(`a${text}0${text}${text}`))).toBe(`a${text}0${text}${text}`);
    }
  });

  it('decodes the empty string', () => {
    expect(decode(Buffer.alloc(0))).toBe('');
  });

  it('decodes any latin1 string the encoder wrote', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (octets) => {
        const text = Buffer.from(octets).toString('latin1');
        expect(decode(huffmanEncode(text))).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });

  it('decodes a range in the middle of a buffer, and no further', () => {
    const encoded = huffmanEncode('grpc-timeout');
    const buffer = Buffer.concat([Buffer.from([0x00, 0x00]), encoded, Buffer.from([0x00])]);
    const out = Buffer.alloc(huffmanDecodedLengthBound(encoded.length));
    const length = huffmanDecode(buffer, 2, 2 + encoded.length, out);
    expect(out.toString('latin1', 0, length)).toBe('grpc-timeout');
  });

  // §5.2: padding is the most significant bits of EOS (all ones), shorter than an octet.
  it('accepts 0 to 7 bits of one-padding', () => {
    // '0' is 00000: n of them leave 8 - (5n mod 8) bits of padding, so 1 to 16 cover every length from 0 to 7.
    for (let count = 1; count <= 16; count += 1) {
      const text = '0'.repeat(count);
      expect(decode(huffmanEncode(text))).toBe(text);
    }
    expect(decode(hex('07'))).toBe('0'); // 00000 111
  });

  it('refuses padding of 8 bits or more', () => {
    expect(decode(Buffer.from([0xff]))).toBeUndefined();
    expect(decode(Buffer.concat([huffmanEncode('0'.repeat(8)), Buffer.from([0xff])]))).toBeUndefined();
    expect(decode(Buffer.concat([huffmanEncode('a'), Buffer.from([0xff])]))).toBeUndefined();
    expect(decode(Buffer.from([0xff, 0xff, 0xff, 0xff]))).toBeUndefined();
  });

  it('refuses padding that is not all ones', () => {
    expect(decode(packBits(huffmanBits([0x61]), '0'))).toBeUndefined(); // 'a' then 000
    expect(decode(hex('06'))).toBeUndefined(); // '0' then 110
    expect(decode(hex('05'))).toBeUndefined(); // '0' then 101
    // ':' (1011100) then a 0 bit, the octet full without padding.
    expect(decode(packBits(`${huffmanBits([0x3a])}0`))).toBeUndefined();
    // The first 8 bits of a 13-bit code (0x00's, 1111111111000) are all ones: over-long padding, refused.
    expect(decode(packBits(huffmanBits([0x00]).slice(0, 8)))).toBeUndefined();
  });

  it('refuses EOS anywhere in the string', () => {
    expect(decode(packBits(huffmanBits([HUFFMAN_EOS])))).toBeUndefined();
    expect(decode(packBits(huffmanBits([0x61, HUFFMAN_EOS, 0x61])))).toBeUndefined();
    expect(decode(packBits(huffmanBits([HUFFMAN_EOS, 0x30, 0x30])))).toBeUndefined();
    for (let offset = 0; offset < 8; offset += 1) {
      expect(decode(packBits(huffmanBits([...Array<number>(offset).fill(0x30), HUFFMAN_EOS, 0x61])))).toBeUndefined();
    }
  });

  // A valid string's padding is fixed by its symbols, so decoding is one-to-one:
  // whatever decodes must be exactly what the encoder writes for its result.
  it('for any octets, either refuses them or decodes what encodes back to them', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (octets) => {
        const encoded = Buffer.from(octets);
        const decoded = decode(encoded);
        if (decoded !== undefined) expect(huffmanEncode(decoded)).toEqual(encoded);
      }),
      { numRuns: 5000 },
    );
  });

  it('writes no more than huffmanDecodedLengthBound octets', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (octets) => {
        const encoded = Buffer.from(octets);
        const bound = huffmanDecodedLengthBound(encoded.length);
        const out = Buffer.alloc(bound + 8, 0xaa);
        const length = huffmanDecode(encoded, 0, encoded.length, out);
        expect(length).toBeLessThanOrEqual(bound);
        expect(out.subarray(bound).every((octet) => octet === 0xaa)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
