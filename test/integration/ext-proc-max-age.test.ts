import type * as http2 from 'node:http2';
import { systemClock } from '../../src/platform/clock';
import type { MeteredResponse } from '../../src/metering/metered-response';
import { PROCESS_PATH, processMethod } from '../../src/metering/ext-proc-service';
import { DEFAULT_GRPC_SERVER_SETTINGS, GrpcServer } from '../../src/transport/grpc-server';
import { createLogger } from '../../src/platform/logger';
import { EXT_PROC_ATTRIBUTES_KEY, headerMap, observed, serializeProcessingRequest } from '../support/ext-proc-official';
import { connect, GRPC_HEADERS, grpcFrame } from '../support/raw-grpc';
import { usageFixture } from '../support/usage-fixtures';
import * as fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ENVOY_YAML } from '../e2e/authz-cluster';
import { extProcSettingsFromEnvoyYaml } from '../e2e/ext-proc-tap';

/**
 * GRPC_MAX_CONNECTION_AGE_MS against long metering streams: a connection is
 * recycled (GOAWAY) at its age, but a Process stream open on it meters an
 * answer that may run for minutes. The transport keeps such a connection
 * until its bidi calls end (maxStreamingCallDrainMs), so the answer is
 * metered whole, `complete`, never cut at the 30 s grace of unary calls.
 * Here with the real Process method on the real transport, times scaled
 * down; and the default drain bound against envoy.yaml's own timeouts.
 */
const logger = createLogger('silent');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function processingFrame(message: object): Buffer {
  return grpcFrame(serializeProcessingRequest(observed(message)));
}

it('a Process stream open across the connection recycle is metered whole, long after the grace period', async () => {
  const recorded: MeteredResponse[] = [];
  const server = new GrpcServer(
    { host: '127.0.0.1', port: 0, maxConnectionAgeMs: 100, maxConnectionAgeGraceMs: 200, maxStreamingCallDrainMs: 10_000 },
    logger,
  );
  server.addMethod(PROCESS_PATH, processMethod({ sink: { record: (r) => recorded.push(r) }, clock: systemClock, logger, maxStreams: 10 }));
  const port = await server.listen();
  const session = connect(`127.0.0.1:${port}`);
  let goawayAt = 0;
  session.on('goaway', () => (goawayAt ||= Date.now()));
  try {
    const stream: http2.ClientHttp2Stream = session.request({ ...GRPC_HEADERS, ':path': PROCESS_PATH }, { endStream: false });
    const ended = new Promise<http2.IncomingHttpHeaders>((resolve) => {
      // Trailers, or the headers of a Trailers-Only answer (the processor writes no message in observability mode).
      let trailers: http2.IncomingHttpHeaders = {};
      stream.on('response', (h: http2.IncomingHttpHeaders) => (trailers = { ...trailers, ...h }));
      stream.on('trailers', (t: http2.IncomingHttpHeaders) => (trailers = { ...trailers, ...t }));
      stream.on('data', () => undefined);
      stream.on('error', () => undefined);
      stream.on('close', () => resolve(trailers));
    });
    const identity: [string, string][] = [
      [':path', '/v1/messages'],
      [':method', 'POST'],
      ['x-request-id', 'req-across-recycle'],
      ['x-gateway-account-id', 'acme'],
      ['x-gateway-key-id', 'key_ki7sq0QuenAUq8kr'],
      ['x-gateway-key-prefix', 'gk_live_1mm5'],
      ['x-gateway-route-family', 'messages'],
    ];
    stream.write(processingFrame({ request_headers: { headers: headerMap(identity), end_of_stream: false } }));
    stream.write(
      processingFrame({
        response_headers: {
          headers: headerMap([
            [':status', '200'],
            ['content-type', 'text/event-stream'],
          ]),
          end_of_stream: false,
        },
        attributes: { [EXT_PROC_ATTRIBUTES_KEY]: { fields: { 'request.size': { numberValue: 100 } } } },
      }),
    );
    // messages-stream.sse: 25 input and 15 output tokens. Half before the recycle, half well after its grace period.
    const body = Buffer.from(usageFixture('messages-stream.sse'));
    const half = Math.floor(body.length / 2);
    stream.write(processingFrame({ response_body: { body: body.subarray(0, half), end_of_stream: false } }));
    const deadline = Date.now() + 5_000;
    while (goawayAt === 0 && Date.now() < deadline) await sleep(10);
    expect(goawayAt).toBeGreaterThan(0);
    await sleep(700);
    expect(recorded).toEqual([]);
    stream.write(processingFrame({ response_body: { body: body.subarray(half), end_of_stream: true } }));
    const trailers = await ended;

    expect(trailers['grpc-status']).toBe('0');
    expect(Date.now() - goawayAt).toBeGreaterThan(200 + 500);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      requestId: 'req-across-recycle',
      delivery: 'complete',
      outcome: { kind: 'metered', usage: { tokens: { inputTokens: 25, outputTokens: 15 }, estimated: false } },
    });
  } finally {
    session.destroy();
    await server.close();
  }
});

/** The longest route timeout in envoy.yaml (ms): the longest an answer, and so its Process stream, may run. 0s (none) is unbounded. */
function longestRouteTimeoutMs(): number {
  const text = fs.readFileSync(ENVOY_YAML, 'utf8');
  const timeouts: number[] = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === 'object') {
      const route = (node as { route?: { cluster?: unknown; timeout?: unknown } }).route;
      if (route && typeof route === 'object' && route.cluster !== undefined) {
        // Envoy's default route timeout is 15 s.
        const seconds =
          route.timeout === undefined ? 15 : Number(/^([0-9.]+)s$/.exec(typeof route.timeout === 'string' ? route.timeout : '')?.[1]);
        timeouts.push(seconds === 0 ? Infinity : seconds * 1000);
      }
      Object.values(node).forEach(visit);
    }
  };
  visit(parseYaml(text));
  expect(timeouts.length).toBeGreaterThan(0);
  return Math.max(...timeouts);
}

it("keeps a recycled connection's Process streams at least as long as envoy.yaml lets an answer and its ext_proc stream run", () => {
  const longestStreamMs = longestRouteTimeoutMs() + extProcSettingsFromEnvoyYaml().deferredCloseTimeoutMs;
  expect(longestStreamMs).toBe(605_000);
  expect(DEFAULT_GRPC_SERVER_SETTINGS.maxStreamingCallDrainMs).toBeGreaterThanOrEqual(longestStreamMs);
});
