/**
 * The header blocks this server sends (RFC 7541): every field a literal
 * "without indexing", never Huffman-coded. The server's answers repeat a
 * handful of short fields, so a dynamic table would save the client a few
 * bytes and cost this side its bookkeeping on every answer; the common
 * blocks are encoded once, at load.
 */

/** RFC 7541 Appendix A: `:status` with the values it indexes, and the names this encoder reuses. */
const STATUS_INDEX: Readonly<Record<number, number>> = { 200: 8, 204: 9, 206: 10, 304: 11, 400: 12, 404: 13, 500: 14 };
const NAME_INDEX: Readonly<Record<string, number>> = { ':status': 8, 'content-type': 31 };

/**
 * A dynamic table size update to 0 (§6.3): sent at the start of the first
 * block after the client's SETTINGS_HEADER_TABLE_SIZE changes, since a
 * decoder may hold the encoder to a smaller table (this encoder uses none).
 */
export const TABLE_SIZE_UPDATE_ZERO = 0x20;

function integerBytes(value: number, prefixBits: number, firstByteFlags: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByteFlags | value];
  const bytes = [firstByteFlags | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return bytes;
}

function stringBytes(text: string): number[] {
  return [...integerBytes(text.length, 7, 0), ...Buffer.from(text, 'latin1')];
}

/** One block from name, value, name, value, …: names lower case, values latin1 (a grpc-message is percent-encoded ASCII). */
export function encodeHeaderBlock(fields: readonly string[]): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const indexedStatus = name === ':status' ? STATUS_INDEX[Number(value)] : undefined;
    if (indexedStatus !== undefined && String(Number(value)) === value) {
      bytes.push(0x80 | indexedStatus);
      continue;
    }
    const nameIndex = NAME_INDEX[name];
    // Literal without indexing (0000xxxx): an indexed name, or a new one after a 0 index.
    if (nameIndex !== undefined) bytes.push(...integerBytes(nameIndex, 4, 0));
    else bytes.push(0, ...stringBytes(name));
    bytes.push(...stringBytes(value));
  }
  return Buffer.from(bytes);
}

/** `:status: 200` and `content-type: application/grpc`: the HEADERS of every answer with a message. */
export const RESPONSE_HEADERS_BLOCK = encodeHeaderBlock([':status', '200', 'content-type', 'application/grpc']);
/** `grpc-status: 0`: the trailers of every call that ends OK. */
export const OK_TRAILERS_BLOCK = encodeHeaderBlock(['grpc-status', '0']);
