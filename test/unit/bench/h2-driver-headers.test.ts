import * as http2 from 'node:http2';
import { REQUEST_HEADERS } from '../../bench/h2-driver';
import { RawH2Connection } from '../../bench/raw-h2-connection';

/**
 * The bench driver indexes its request headers in HPACK's dynamic table as
 * Envoy's codec (nghttp2) does. A real decoder, node:http2's (nghttp2's
 * inflater), must read the same headers on the first request, which inserts
 * them, and on every later one, which names them by index.
 */
it('sends the same request headers on every request of a connection, as nghttp2 decodes them', async () => {
  const seen: http2.IncomingHttpHeaders[] = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    seen.push(headers);
    stream.on('data', () => undefined);
    stream.on('end', () => stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const connection = await RawH2Connection.connect('127.0.0.1', port, REQUEST_HEADERS);
  try {
    for (let i = 0; i < 5; i += 1) {
      await new Promise<void>((resolve) => connection.request(Buffer.from([0, 0, 0, 0, 0]), false, () => resolve()));
    }
    // Three at once: the first is not special once the table holds the entries.
    await Promise.all(
      [0, 1, 2].map(() => new Promise<void>((resolve) => connection.request(Buffer.from([0, 0, 0, 0, 0]), false, () => resolve()))),
    );
    expect(seen).toHaveLength(8);
    for (const headers of seen) {
      for (const [name, value] of REQUEST_HEADERS) expect(headers[name]).toBe(value);
    }
  } finally {
    connection.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
