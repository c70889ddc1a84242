import * as http2 from 'node:http2';
import { H2Driver } from '../../bench/h2-driver';
import { malformedKeys, uniformTraffic } from '../../bench/traffic';

/**
 * The bench's overload driver against a real node:http2 server, as Envoy's
 * HTTP/2 pool behaves: a connection at the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS is full, and another one is opened while
 * Checks wait, up to the limit it is given; never more streams on a
 * connection than the server advertised.
 */
const STREAMS_PER_CONNECTION = 2;

async function holdingServer(): Promise<{
  address: string;
  maxOpenOnOneSession: () => number;
  release: () => void;
  close: () => Promise<void>;
}> {
  const held: http2.ServerHttp2Stream[] = [];
  let maxOpen = 0;
  const open = new Map<http2.Http2Session, number>();
  const server = http2.createServer({ settings: { maxConcurrentStreams: STREAMS_PER_CONNECTION } });
  server.on('stream', (stream) => {
    const session = stream.session!;
    open.set(session, (open.get(session) ?? 0) + 1);
    maxOpen = Math.max(maxOpen, open.get(session)!);
    stream.on('close', () => open.set(session, open.get(session)! - 1));
    stream.on('data', () => undefined);
    stream.on('end', () => held.push(stream));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const answer = (stream: http2.ServerHttp2Stream) => {
    if (stream.closed) return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14' }, { endStream: true });
  };
  return {
    address: `127.0.0.1:${port}`,
    maxOpenOnOneSession: () => maxOpen,
    release: () => {
      for (const stream of held.splice(0)) answer(stream);
    },
    close: () =>
      new Promise((resolve) => {
        for (const session of open.keys()) session.destroy();
        server.close(() => resolve());
      }),
  };
}

it('opens another connection when every open one is at the server’s stream limit, up to its maximum, and queues the rest', async () => {
  const server = await holdingServer();
  const driver = await H2Driver.connect(server.address, 1, 3);
  try {
    const traffic = uniformTraffic('malformed', malformedKeys(8));
    const sent = driver.sendAll(traffic, 8);
    // Three connections of two streams each are held; the other two Checks wait in the driver.
    for (let i = 0; i < 100 && driver.connectionCount < 3; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(driver.connectionCount).toBe(3);
    expect(server.maxOpenOnOneSession()).toBe(STREAMS_PER_CONNECTION);
    const release = setInterval(() => server.release(), 20);
    try {
      const result = await sent;
      // Trailers-only answers: every Check was answered (a gRPC error each).
      expect(result.errors).toBe(8);
    } finally {
      clearInterval(release);
    }
    expect(driver.connectionCount).toBe(3);
    expect(server.maxOpenOnOneSession()).toBe(STREAMS_PER_CONNECTION);
  } finally {
    driver.close();
    await server.close();
  }
});

it('keeps a fixed pool when given no maximum above its size (the saturation and tail phases)', async () => {
  const server = await holdingServer();
  const driver = await H2Driver.connect(server.address, 2);
  try {
    const sent = driver.sendAll(uniformTraffic('malformed', malformedKeys(6)), 6);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(driver.connectionCount).toBe(2);
    const release = setInterval(() => server.release(), 20);
    try {
      expect((await sent).errors).toBe(6);
    } finally {
      clearInterval(release);
    }
  } finally {
    driver.close();
    await server.close();
  }
});
