import { HpackDecoder } from '../../../src/transport/http2/hpack-decoder';
import { encodeHeaderBlock, OK_TRAILERS_BLOCK, RESPONSE_HEADERS_BLOCK } from '../../../src/transport/http2/hpack-encoder';
import { prng } from '../../bench/traffic';

/**
 * The server's header blocks read back by the decoder (itself held to
 * RFC 7541's examples and to nghttp2's encoder in hpack-decoder.test.ts);
 * real clients read them in http2-connection.test.ts.
 */
function decoded(block: Buffer): string[] {
  const out: string[] = [];
  new HpackDecoder().decode(block, 0, block.length, out);
  return out;
}

it('encodes the answers every call sends as the fields they stand for', () => {
  expect(decoded(RESPONSE_HEADERS_BLOCK)).toEqual([':status', '200', 'content-type', 'application/grpc']);
  expect(decoded(OK_TRAILERS_BLOCK)).toEqual(['grpc-status', '0']);
});

it('round-trips any fields: indexed and literal :status, indexed and new names, values of any length and latin1 byte', () => {
  const random = prng(7541);
  const below = (n: number) => Math.floor(random() * n);
  for (let run = 0; run < 500; run += 1) {
    const fields: string[] = [];
    for (let i = below(6); i >= 0; i -= 1) {
      const kind = below(4);
      if (kind === 0) fields.push(':status', String([200, 204, 404, 415, 500, 405][below(6)]));
      else if (kind === 1) fields.push('content-type', 'application/grpc');
      else {
        const name = Array.from({ length: 1 + below(300) }, () => String.fromCharCode(97 + below(26))).join('');
        const value = Array.from({ length: below(400) }, () => String.fromCharCode(below(256))).join('');
        fields.push(name, value);
      }
    }
    expect(decoded(encodeHeaderBlock(fields))).toEqual(fields);
  }
});
