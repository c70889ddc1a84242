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
