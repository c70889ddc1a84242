/**
 * The Huffman code of HPACK (RFC 7541 §5.2, Appendix B) and its decoder.
 *
 * Decoding reads one octet per step from a table built here at load: for
 * each of the code tree's 256 inner nodes and each octet, the node the walk
 * ends on and the symbols it completes on the way. An octet completes at
 * most two symbols (codes are 5 to 30 bits), so a step is one lookup and at
 * most two stores, where a tree walk would branch on every bit.
 */

// prettier-ignore
/** Appendix B: the code of octet i (and of EOS, i = 256), right-aligned, HUFFMAN_CODE_LENGTHS[i] bits long. */
export const HUFFMAN_CODES: readonly number[] = [
  /* 0x00 */ 0x1ff8,     0x7fffd8,   0xfffffe2,  0xfffffe3,  0xfffffe4,  0xfffffe5,  0xfffffe6,  0xfffffe7,
  /* 0x08 */ 0xfffffe8,  0xffffea,   0x3ffffffc, 0xfffffe9,  0xfffffea,  0x3ffffffd, 0xfffffeb,  0xfffffec,
  /* 0x10 */ 0xfffffed,  0xfffffee,  0xfffffef,  0xffffff0,  0xffffff1,  0xffffff2,  0x3ffffffe, 0xffffff3,
  /* 0x18 */ 0xffffff4,  0xffffff5,  0xffffff6,  0xffffff7,  0xffffff8,  0xffffff9,  0xffffffa,  0xffffffb,
  /* 0x20 */ 0x14,       0x3f8,      0x3f9,      0xffa,      0x1ff9,     0x15,       0xf8,       0x7fa,
  /* 0x28 */ 0x3fa,      0x3fb,      0xf9,       0x7fb,      0xfa,       0x16,       0x17,       0x18,
  /* 0x30 */ 0x0,        0x1,        0x2,        0x19,       0x1a,       0x1b,       0x1c,       0x1d,
  /* 0x38 */ 0x1e,       0x1f,       0x5c,       0xfb,       0x7ffc,     0x20,       0xffb,      0x3fc,
  /* 0x40 */ 0x1ffa,     0x21,       0x5d,       0x5e,       0x5f,       0x60,       0x61,       0x62,
  /* 0x48 */ 0x63,       0x64,       0x65,       0x66,       0x67,       0x68,       0x69,       0x6a,
  /* 0x50 */ 0x6b,       0x6c,       0x6d,       0x6e,       0x6f,       0x70,       0x71,       0x72,
  /* 0x58 */ 0xfc,       0x73,       0xfd,       0x1ffb,     0x7fff0,    0x1ffc,     0x3ffc,     0x22,
  /* 0x60 */ 0x7ffd,     0x3,        0x23,       0x4,        0x24,       0x5,        0x25,       0x26,
  /* 0x68 */ 0x27,       0x6,        0x74,       0x75,       0x28,       0x29,       0x2a,       0x7,
  /* 0x70 */ 0x2b,       0x76,       0x2c,       0x8,        0x9,        0x2d,       0x77,       0x78,
  /* 0x78 */ 0x79,       0x7a,       0x7b,       0x7ffe,     0x7fc,      0x3ffd,     0x1ffd,     0xffffffc,
  /* 0x80 */ 0xfffe6,    0x3fffd2,   0xfffe7,    0xfffe8,    0x3fffd3,   0x3fffd4,   0x3fffd5,   0x7fffd9,
  /* 0x88 */ 0x3fffd6,   0x7fffda,   0x7fffdb,   0x7fffdc,   0x7fffdd,   0x7fffde,   0xffffeb,   0x7fffdf,
  /* 0x90 */ 0xffffec,   0xffffed,   0x3fffd7,   0x7fffe0,   0xffffee,   0x7fffe1,   0x7fffe2,   0x7fffe3,
  /* 0x98 */ 0x7fffe4,   0x1fffdc,   0x3fffd8,   0x7fffe5,   0x3fffd9,   0x7fffe6,   0x7fffe7,   0xffffef,
  /* 0xa0 */ 0x3fffda,   0x1fffdd,   0xfffe9,    0x3fffdb,   0x3fffdc,   0x7fffe8,   0x7fffe9,   0x1fffde,
  /* 0xa8 */ 0x7fffea,   0x3fffdd,   0x3fffde,   0xfffff0,   0x1fffdf,   0x3fffdf,   0x7fffeb,   0x7fffec,
  /* 0xb0 */ 0x1fffe0,   0x1fffe1,   0x3fffe0,   0x1fffe2,   0x7fffed,   0x3fffe1,   0x7fffee,   0x7fffef,
  /* 0xb8 */ 0xfffea,    0x3fffe2,   0x3fffe3,   0x3fffe4,   0x7ffff0,   0x3fffe5,   0x3fffe6,   0x7ffff1,
  /* 0xc0 */ 0x3ffffe0,  0x3ffffe1,  0xfffeb,    0x7fff1,    0x3fffe7,   0x7ffff2,   0x3fffe8,   0x1ffffec,
  /* 0xc8 */ 0x3ffffe2,  0x3ffffe3,  0x3ffffe4,  0x7ffffde,  0x7ffffdf,  0x3ffffe5,  0xfffff1,   0x1ffffed,
  /* 0xd0 */ 0x7fff2,    0x1fffe3,   0x3ffffe6,  0x7ffffe0,  0x7ffffe1,  0x3ffffe7,  0x7ffffe2,  0xfffff2,
  /* 0xd8 */ 0x1fffe4,   0x1fffe5,   0x3ffffe8,  0x3ffffe9,  0xffffffd,  0x7ffffe3,  0x7ffffe4,  0x7ffffe5,
  /* 0xe0 */ 0xfffec,    0xfffff3,   0xfffed,    0x1fffe6,   0x3fffe9,   0x1fffe7,   0x1fffe8,   0x7ffff3,
  /* 0xe8 */ 0x3fffea,   0x3fffeb,   0x1ffffee,  0x1ffffef,  0xfffff4,   0xfffff5,   0x3ffffea,  0x7ffff4,
  /* 0xf0 */ 0x3ffffeb,  0x7ffffe6,  0x3ffffec,  0x3ffffed,  0x7ffffe7,  0x7ffffe8,  0x7ffffe9,  0x7ffffea,
  /* 0xf8 */ 0x7ffffeb,  0xffffffe,  0x7ffffec,  0x7ffffed,  0x7ffffee,  0x7ffffef,  0x7fffff0,  0x3ffffee,
  /* EOS */  0x3fffffff,
];

// prettier-ignore
/** Appendix B: each code's length in bits, 5 to 30. */
export const HUFFMAN_CODE_LENGTHS: readonly number[] = [
  /* 0x00 */ 13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  /* 0x10 */ 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  /* 0x20 */ 6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
  /* 0x30 */ 5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,
  /* 0x40 */ 13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,
  /* 0x50 */ 7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
  /* 0x60 */ 15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,
  /* 0x70 */ 6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,
  /* 0x80 */ 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  /* 0x90 */ 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  /* 0xa0 */ 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  /* 0xb0 */ 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  /* 0xc0 */ 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  /* 0xd0 */ 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  /* 0xe0 */ 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  /* 0xf0 */ 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  /* EOS */  30,
];

export const HUFFMAN_EOS = 256;

// A transition packs: the next state (bits 0–7), the first and second
// symbol completed (8–15, 16–23), and from bit 24 how many (0, 1 or 2), or
// FAILED when the octet completes EOS, which §5.2 makes an error wherever it
// appears.
const FAILED = 3;
const TRANSITIONS = new Uint32Array(256 * 256);
/** The states a string may end in: reached from the root by at most 7 one-bits (§5.2's padding, the start of EOS). */
const ACCEPTING = new Uint8Array(256);

buildTables();

function buildTables(): void {
  // The code is complete (the Kraft sum of its lengths is 1), so its tree has
  // 256 inner nodes for 257 leaves and a state fits in an octet. A child is an
  // inner node's number, or ~symbol for a leaf.
  const children = new Int32Array(256 * 2);
  let nodes = 1;
  for (let symbol = 0; symbol <= HUFFMAN_EOS; symbol += 1) {
    const code = HUFFMAN_CODES[symbol]!;
    let node = 0;
    for (let bit = HUFFMAN_CODE_LENGTHS[symbol]! - 1; bit > 0; bit -= 1) {
      const slot = node * 2 + ((code >>> bit) & 1);
      if (children[slot] === 0) {
        children[slot] = nodes;
        nodes += 1;
      }
      node = children[slot]!;
    }
    children[node * 2 + (code & 1)] = ~symbol;
  }
  // A mistyped code or length would most likely change the tree's size: fail at load, not decode wrongly.
  if (nodes !== 256) throw new Error(`HPACK Huffman code tree has ${nodes} inner nodes, not 256`);

  let padding = 0;
  for (let ones = 0; ones <= 7; ones += 1) {
    ACCEPTING[padding] = 1;
    padding = children[padding * 2 + 1]!;
  }

  // Walk the tree a nibble at a time (at most one symbol each: codes are at
  // least 5 bits), then join two nibbles into each octet's transition.
  const nibbles = new Uint32Array(256 * 16);
  for (let state = 0; state < 256; state += 1) {
    for (let nibble = 0; nibble < 16; nibble += 1) {
      let node = state;
      let symbol = -1;
      let failed = false;
      for (let bit = 3; bit >= 0 && !failed; bit -= 1) {
        const child = children[node * 2 + ((nibble >> bit) & 1)]!;
        if (child >= 0) {
          node = child;
        } else if (~child === HUFFMAN_EOS) {
          failed = true;
        } else {
          symbol = ~child;
          node = 0;
        }
      }
      nibbles[state * 16 + nibble] = failed ? FAILED << 24 : symbol < 0 ? node : node | (symbol << 8) | (1 << 24);
    }
  }
  for (let state = 0; state < 256; state += 1) {
    for (let octet = 0; octet < 256; octet += 1) {
      const high = nibbles[state * 16 + (octet >> 4)]!;
      const low = nibbles[(high & 0xff) * 16 + (octet & 15)]!;
      const highCount = high >>> 24;
      const lowCount = low >>> 24;
      let transition: number;
      if (highCount === FAILED || lowCount === FAILED) transition = FAILED << 24;
      else if (highCount === 0) transition = low;
      else if (lowCount === 0) transition = (high & 0xff00) | (low & 0xff) | (1 << 24);
      else transition = (high & 0xff00) | ((low & 0xff00) << 8) | (low & 0xff) | (2 << 24);
      TRANSITIONS[(state << 8) | octet] = transition;
    }
  }
}

/** The most octets a Huffman string of `encodedLength` octets decodes to: every code is at least 5 bits. */
export function huffmanDecodedLengthBound(encodedLength: number): number {
  return Math.floor((encodedLength * 8) / 5);
}

/**
 * Decodes src[start, end) into dst from 0, which must hold
 * huffmanDecodedLengthBound(end - start) octets. Returns the decoded length,
 * or -1 when the string is malformed: EOS inside it, or padding longer than
 * 7 bits or not all ones (§5.2).
 */
export function huffmanDecode(src: Buffer, start: number, end: number, dst: Buffer): number {
  let state = 0;
  let length = 0;
  for (let i = start; i < end; i += 1) {
    const transition = TRANSITIONS[(state << 8) | src[i]!]!;
    const count = transition >>> 24;
    if (count !== 0) {
      if (count === FAILED) return -1;
      dst[length] = (transition >>> 8) & 0xff;
      length += 1;
      if (count === 2) {
        dst[length] = (transition >>> 16) & 0xff;
        length += 1;
      }
    }
    state = transition & 0xff;
  }
  return ACCEPTING[state] === 1 ? length : -1;
}
