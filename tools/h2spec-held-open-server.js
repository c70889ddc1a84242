#!/usr/bin/env node
'use strict';
/**
 * Our HTTP/2 transport (dist/transport/http2/connection.js, from `npm run build`) serving streams the way a
 * gRPC call holds them: open until the client's END_STREAM, then answered with HEADERS, one DATA and trailers.
 *
 * Why: h2spec's requests are plain GETs without a gRPC content-type, which the service answers at once (415,
 * Trailers-Only, and RST_STREAM(NO_ERROR) before the client's END_STREAM). A case whose frame arrives after that
 * answer then sees a stream this side has closed, and the RFC has it dropped. Run h2spec against this server to judge
 * those cases on a held stream (docs/design/http2-conformance.md).
 *
 *   node tools/h2spec-held-open-server.js [port]     prints {"port":N} once listening (port 0, the default: any free one)
 */
const net = require('node:net');
const path = require('node:path');
const { Http2Connection } = require(path.join(__dirname, '..', 'dist', 'transport', 'http2', 'connection.js'));
const { readIntoOneBuffer } = require(path.join(__dirname, '..', 'dist', 'transport', 'accepted-socket.js'));

/** `:status 200` and `content-type: text/plain` (HPACK static entries 8 and 31); trailers `grpc-status: 0` as a literal. */
const RESPONSE_HEADERS = Buffer.from([0x88, 0x5f, 0x0a, ...Buffer.from('text/plain')]);
const TRAILERS = Buffer.from([0x00, 0x0b, ...Buffer.from('grpc-status'), 0x01, 0x30]);
const BODY = Buffer.from('held open until the END_STREAM\n');

const port = Number(process.argv[2] ?? 0);
// Read as the gRPC server reads: every connection into one shared buffer (src/transport/accepted-socket.ts).
const server = net.createServer({ noDelay: true, pauseOnConnect: true }, (accepted) => {
  const socket = readIntoOneBuffer(accepted, (bytes) => connection.receive(bytes));
  if (socket === undefined) return;
  const connection = new Http2Connection(
    socket,
    { maxConcurrentStreams: 100, maxHeaderListBytes: 16 * 1024 },
    {
      stream(stream) {
        const answer = () => stream.respond(RESPONSE_HEADERS, BODY, TRAILERS);
        if (stream.remoteEnded) {
          answer();
          return undefined;
        }
        return { onData() {}, onEnd: answer, onClose() {} };
      },
      closed() {},
      error() {},
    },
  );
});
server.listen(port, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
