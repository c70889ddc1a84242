import { HUFFMAN_CODE_LENGTHS, HUFFMAN_CODES } from '../../src/transport/http2/huffman';

/**
 * Test-side HPACK (RFC 7541) encoding, simple rather than fast: enough to
 * write header blocks octet by octet, well-formed or deliberately not.
 */

/** Octets from a hex dump as RFC 7541 Appendix C prints them ("8286 8441 …"). */
export function hex(dump: string): Buffer {
  return Buffer.from(dump.replace(/\s+/g, ''), 'hex');
}

/** §5.1: `value` with a `prefixBits` prefix, the first octet's other bits from `flags`. */
export function hpackInteger(value: number, prefixBits: number, flags = 0): number[] {
  const prefixMax = (1 << prefixBits) - 1;
  if (value < prefixMax) return [flags | value];
  const octets = [flags | prefixMax];
  let rest = value - prefixMax;
  while (rest >= 128) {
    octets.push((rest % 128) | 0x80);
    rest = Math.floor(rest / 128);
  }
  octets.push(rest);
  return octets;
}

/** The Appendix B codes of `symbols` (octets, or 256 for EOS) as a string of '0' and '1'. */
export function huffmanBits(symbols: Iterable<number>): string {
  let bits = '';
  for (const symbol of symbols) bits += HUFFMAN_CODES[symbol]!.toString(2).padStart(HUFFMAN_CODE_LENGTHS[symbol]!, '0');
  return bits;
}

/** Bits to octets, the last one filled out with `padding` (§5.2: the most significant bits of EOS, all ones). */
export function packBits(bits: string, padding = '1'): Buffer {
  const padded = bits + padding.repeat((8 - (bits.length % 8)) % 8);
  const octets = Buffer.alloc(padded.length / 8);
  for (let i = 0; i < octets.length; i += 1) octets[i] = parseInt(padded.slice(i * 8, i * 8 + 8), 2);
  return octets;
}

/** A latin1 string (one octet per char) Huffman-coded. */
export function huffmanEncode(text: string): Buffer {
  return packBits(huffmanBits(Buffer.from(text, 'latin1')));
}

/** §5.2 string literal: length prefix (H flag set when Huffman-coded), then the octets. */
export function hpackString(text: string, huffman = false): number[] {
  const octets = huffman ? huffmanEncode(text) : Buffer.from(text, 'latin1');
  return [...hpackInteger(octets.length, 7, huffman ? 0x80 : 0), ...octets];
}
