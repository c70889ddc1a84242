/**
 * The header blocks this server sends (RFC 7541): every field a literal
 * "without indexing", never Huffman-coded. The server's answers repeat a
 * handful of short fields, so a dynamic table would save the client a few
 * bytes and cost this side its bookkeeping on every answer; the common
 * blocks are encoded once, at load.
 */

import { HPACK_STATIC_TABLE } from './hpack-static-table';

/** From the static table: `:status` values it holds whole, and the first index of each name (a literal's name). */
const STATUS_INDEX = new Map<string, number>();
const NAME_INDEX = new Map<string, number>();
HPACK_STATIC_TABLE.forEach(({ name, value }, i) => {
  if (name === ':status') STATUS_INDEX.set(value, i + 1);
  if (!NAME_INDEX.has(name)) NAME_INDEX.set(name, i + 1);
});

/**
 * A dynamic table size update to 0 (§6.3): sent at the start of the first
 * block after the client's SETTINGS_HEADER_TABLE_SIZE changes, since a
 * decoder may hold the encoder to a smaller table (this encoder uses none).
 */
export const TABLE_SIZE_UPDATE_ZERO = 0x20;

/** §5.1 integer at `at`, with `prefixBits` and the first octet's other bits; returns the offset after it. */
function writeInteger(target: Buffer, at: number, value: number, prefixBits: number, firstByteFlags: number): number {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    target[at] = firstByteFlags | value;
    return at + 1;
  }
  target[at++] = firstByteFlags | max;
  let rest = value - max;
  while (rest >= 128) {
    target[at++] = (rest & 0x7f) | 0x80;
    rest = Math.floor(rest / 128);
  }
  target[at] = rest;
  return at + 1;
}

/** §5.2 string literal, not Huffman-coded. */
function writeString(target: Buffer, at: number, text: string): number {
  const next = writeInteger(target, at, text.length, 7, 0);
  return next + target.write(text, next, 'latin1');
}

/** An integer of a header's lengths takes at most this many octets (lengths below 2^28). */
const MAX_INTEGER_BYTES = 5;

/**
 * One block from name, value, name, value, …: names lower case, values latin1 (a grpc-message is percent-encoded
 * ASCII). Written straight into one buffer: a shed Check's Trailers-Only answer is encoded on the overload path.
 */
export function encodeHeaderBlock(fields: readonly string[]): Buffer {
  let bound = 0;
  for (let i = 0; i < fields.length; i += 2) bound += 1 + 2 * MAX_INTEGER_BYTES + fields[i]!.length + fields[i + 1]!.length;
  const block = Buffer.allocUnsafe(bound);
  let at = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const indexedStatus = name === ':status' ? STATUS_INDEX.get(value) : undefined;
    if (indexedStatus !== undefined) {
      block[at++] = 0x80 | indexedStatus;
      continue;
    }
    const nameIndex = NAME_INDEX.get(name);
    // Literal without indexing (0000xxxx): an indexed name, or a new one after a 0 index.
    if (nameIndex !== undefined) at = writeInteger(block, at, nameIndex, 4, 0);
    else {
      block[at++] = 0;
      at = writeString(block, at, name);
    }
    at = writeString(block, at, value);
  }
  return block.subarray(0, at);
}

/** `:status: 200` and `content-type: application/grpc`: the HEADERS of every answer with a message. */
export const RESPONSE_HEADERS_BLOCK = encodeHeaderBlock([':status', '200', 'content-type', 'application/grpc']);
/** `grpc-status: 0`: the trailers of every call that ends OK. */
export const OK_TRAILERS_BLOCK = encodeHeaderBlock(['grpc-status', '0']);
