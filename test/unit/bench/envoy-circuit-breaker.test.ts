import * as fs from 'node:fs';
import * as http2 from 'node:http2';
import * as os from 'node:os';
import * as path from 'node:path';
import { extAuthzCircuitBreaker, newRequestDecision, pendingRequestDecision } from '../../bench/envoy-circuit-breaker';
import { H2Driver } from '../../bench/h2-driver';
import { malformedKeys, uniformTraffic } from '../../bench/traffic';

/**
 * The bench's model of Envoy's ext_authz circuit breaker: the thresholds come
 * from envoy.yaml, and past them the driver refuses a Check at once, never
 * sending it, as Envoy's pool answers an overflow. Against a real node:http2
 * server that holds every stream until told to answer, so what is counted
 * depends on the order of events only, not on timing.
 */

/** A server that holds each stream until `release`, and counts the streams it ever had open at once. */
async function holdingServer(streamsPerConnection: number): Promise<{
  address: string;
  seen: () => number;
  maxOpen: () => number;
  release: () => void;
  close: () => Promise<void>;
}> {
  const held: http2.ServerHttp2Stream[] = [];
  const sessions = new Set<http2.Http2Session>();
  let open = 0;
  let maxOpen = 0;
  let seen = 0;
  const server = http2.createServer({ settings: { maxConcurrentStreams: streamsPerConnection } });
  server.on('session', (session) => sessions.add(session));
  server.on('stream', (stream) => {
    seen += 1;
    open += 1;
    maxOpen = Math.max(maxOpen, open);
    stream.on('close', () => (open -= 1));
    stream.on('data', () => undefined);
    stream.on('end', () => held.push(stream));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    seen: () => seen,
    maxOpen: () => maxOpen,
    release: () => {
      for (const stream of held.splice(0)) {
        if (!stream.closed)
          stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14' }, { endStream: true });
      }
    },
    close: () =>
      new Promise((resolve) => {
        for (const session of sessions) session.destroy();
        server.close(() => resolve());
      }),
  };
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(condition()).toBe(true);
}

/** Sends `count` Checks at once, waits until the server holds `held` of them, then answers them all. */
async function sendHeld(driver: H2Driver, server: Awaited<ReturnType<typeof holdingServer>>, count: number, held: number) {
  const sent = driver.sendAll(uniformTraffic('malformed', malformedKeys(count)), count);
  await until(() => server.seen() === held);
  const release = setInterval(() => server.release(), 20);
  try {
    return await sent;
  } finally {
    clearInterval(release);
  }
}

describe("envoy.yaml's thresholds", () => {
  it('are read from the ext_authz cluster of envoy.yaml itself', () => {
    expect(extAuthzCircuitBreaker()).toEqual({ maxConnections: 1024, maxRequests: 128, maxPendingRequests: 16 });
  });

  it("are Envoy's defaults (1024) where the file sets none", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-cb-'));
    const file = path.join(dir, 'envoy.yaml');
    fs.writeFileSync(
      file,
      'static_resources:\n  clusters:\n  - name: ext_authz\n    circuit_breakers: { thresholds: [{ max_requests: 7 }] }\n',
    );
    try {
      expect(extAuthzCircuitBreaker(file)).toEqual({ maxConnections: 1024, maxRequests: 7, maxPendingRequests: 1024 });
      fs.writeFileSync(file, 'static_resources:\n  clusters:\n  - name: upstream_api\n');
      expect(() => extAuthzCircuitBreaker(file)).toThrow('no ext_authz cluster');
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe("Envoy's pool decisions", () => {
  const limits = { maxRequests: 4, maxPendingRequests: 2 };
  it('gives a stream while fewer than max_requests are open, and overflows at it', () => {
    expect(newRequestDecision(limits, { streams: 3, pending: 0, connectionHasRoom: true })).toBe('attach');
    expect(newRequestDecision(limits, { streams: 4, pending: 0, connectionHasRoom: true })).toBe('overflow');
  });
  it('queues a request no connection has room for while fewer than max_pending_requests wait, and overflows at it', () => {
    expect(newRequestDecision(limits, { streams: 0, pending: 1, connectionHasRoom: false })).toBe('pend');
    expect(newRequestDecision(limits, { streams: 0, pending: 2, connectionHasRoom: false })).toBe('overflow');
  });
  it('checks max_requests again when a pending request gets its stream', () => {
    expect(pendingRequestDecision(limits, 3)).toBe('attach');
    expect(pendingRequestDecision(limits, 4)).toBe('overflow');
  });
});

describe('the overload driver behind the modelled circuit breaker', () => {
  it('refuses at once, unsent, what is past max_requests while a connection has room', async () => {
    const server = await holdingServer(100);
    const driver = await H2Driver.connect(server.address, 2, 2, { maxRequests: 3, maxPendingRequests: 2 });
    try {
      const result = await sendHeld(driver, server, 8, 3);
      expect(result.refusedByEnvoy).toBe(5);
      // The three that were sent: answered by the server (trailers-only UNAVAILABLE each).
      expect(result.errors).toBe(3);
      expect(server.seen()).toBe(3);
      expect(server.maxOpen()).toBe(3);
    } finally {
      driver.close();
      await server.close();
    }
  });

  it('lets max_pending_requests wait for a stream, and refuses the rest at once', async () => {
    const server = await holdingServer(2);
    // One connection of two streams, no room to grow: the third Check waits, the fourth finds the queue full.
    const driver = await H2Driver.connect(server.address, 1, 1, { maxRequests: 100, maxPendingRequests: 1 });
    try {
      const result = await sendHeld(driver, server, 8, 2);
      expect(result.refusedByEnvoy).toBe(5);
      expect(result.errors).toBe(3);
      expect(server.seen()).toBe(3);
      expect(server.maxOpen()).toBe(2);
    } finally {
      driver.close();
      await server.close();
    }
  });

  it('refuses a pending Check when it would get its stream past max_requests (a new connection is ready, the bound is not)', async () => {
    const server = await holdingServer(1);
    const driver = await H2Driver.connect(server.address, 1, 2, { maxRequests: 1, maxPendingRequests: 10 });
    try {
      const sent = driver.sendAll(uniformTraffic('malformed', malformedKeys(4)), 4);
      // The first has the only stream; the other three wait, and go to the second connection when it is ready: over max_requests.
      await until(() => driver.connectionCount === 2);
      const release = setInterval(() => server.release(), 20);
      let result;
      try {
        result = await sent;
      } finally {
        clearInterval(release);
      }
      expect(result.refusedByEnvoy).toBe(3);
      expect(result.errors).toBe(1);
      expect(server.seen()).toBe(1);
    } finally {
      driver.close();
      await server.close();
    }
  });

  it('without a circuit breaker sends everything (the raw phases)', async () => {
    const server = await holdingServer(100);
    const driver = await H2Driver.connect(server.address, 2, 2);
    try {
      const result = await sendHeld(driver, server, 8, 8);
      expect(result.refusedByEnvoy).toBe(0);
      expect(result.errors).toBe(8);
    } finally {
      driver.close();
      await server.close();
    }
  });
});
