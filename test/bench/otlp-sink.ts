/**
 * An OTLP/HTTP trace sink for `npm run bench -- --tracing`: accepts every
 * export (POST /v1/traces) and discards it, so that the gateway under test
 * pays the whole cost of exporting (encoding, the HTTP request) and nothing
 * is held here. Prints {"port":N} once listening, and on SIGTERM
 * {"exports":N,"bytes":M} before it exits.
 */
import * as http from 'node:http';

let exportsReceived = 0;
let bytes = 0;
// An empty ExportTraceServiceResponse is zero bytes of protobuf: what a collector answers a full success with.
const server = http.createServer((request, response) => {
  request.on('data', (chunk: Buffer) => (bytes += chunk.length));
  request.on('end', () => {
    exportsReceived += 1;
    response.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  process.stdout.write(`${JSON.stringify({ exports: exportsReceived, bytes })}\n`);
  process.exit(0);
});
