/**
 * `grpc-message` is UTF-8, percent-encoded (PROTOCOL-HTTP2.md): bytes
 * 0x20–0x7E pass except `%`, every other byte becomes %XX. Without it a
 * non-ASCII or control character would make node:http2 refuse the header.
 */
const HEX = '0123456789ABCDEF';

export function percentEncodeGrpcMessage(text: string): string {
  if (isPlain(text)) return text;
  const bytes = Buffer.from(text, 'utf8');
  let out = '';
  for (const byte of bytes) {
    if (byte >= 0x20 && byte <= 0x7e && byte !== 0x25) out += String.fromCharCode(byte);
    else out += `%${HEX[byte >> 4]}${HEX[byte & 15]}`;
  }
  return out;
}

function isPlain(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code > 0x7e || code === 0x25) return false;
  }
  return true;
}

/** The most of a value the client sent that a grpc-message repeats. */
export const ECHOED_VALUE_MAX_CHARS = 64;

/**
 * A value the client sent, quoted for a grpc-message. A long one is cut and
 * its length told: the header it came in may be as large as the server
 * accepts (percent-encoding can triple it), and repeated whole it could make
 * the trailers larger than the peer takes, which would then see a reset
 * stream instead of the status that says what was wrong.
 */
export function quotedClientValue(value: string): string {
  if (value.length <= ECHOED_VALUE_MAX_CHARS) return `"${value}"`;
  return `"${value.slice(0, ECHOED_VALUE_MAX_CHARS)}…" (${value.length} characters)`;
}
