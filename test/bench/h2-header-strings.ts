/**
 * How many bytes each HTTP/2 request puts straight into V8's old generation
 * when it arrives through `node:http2`, by how many non-static header values
 * it carries. A tool for issue 14's "tail" work, not part of `npm run bench`.
 *
 *   npm run build && npm run build:bench
 *   node .bench/build/test/bench/h2-header-strings.js            # 4 to 6 header values (more, and a GC runs while it measures: the line says so)
 *
 * Each case is a fresh server process whose young generation is large enough
 * (128 MB semi-spaces) that no GC runs while it measures: the growth of old
 * space over 10,000 requests is then what was allocated there directly, not
 * promoted. `node:http2` hands every header value that is not in HPACK's
 * static table to JavaScript as an external string, and V8 allocates
 * external strings in old space; a dead one is only freed by a mark-compact,
 * which finalizes it in its atomic pause (`clear.external_string_table` in
 * `--trace-gc-nvp`).
 */
import { spawn } from 'node:child_process';
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import * as readline from 'node:readline';

const MEASURED = 10_000;
const WARMUP = 2_000;
const IN_FLIGHT = 16;

/** The server, as a child's source: old-space bytes per request over MEASURED requests after WARMUP, printed as JSON. */
const SERVER = `
const http2 = require('node:http2');
const v8 = require('node:v8');
const oldSpace = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_used_size;
const gcs = [];
const { PerformanceObserver } = require('node:perf_hooks');
new PerformanceObserver((list) => gcs.push(...list.getEntries())).observe({ entryTypes: ['gc'] });
let seen = 0, start = 0, gcsAtStart = 0;
const server = http2.createServer();
server.on('stream', (stream, headers) => {
  stream.on('data', () => {});
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(Buffer.alloc(5));
  });
  seen += 1;
  if (seen === ${WARMUP}) { start = oldSpace(); gcsAtStart = gcs.length; }
  if (seen === ${WARMUP + MEASURED}) {
    setImmediate(() => {
      process.stdout.write(JSON.stringify({ bytesPerRequest: (oldSpace() - start) / ${MEASURED}, gcsWhileMeasuring: gcs.length - gcsAtStart }) + '\\n');
      process.exit(0);
    });
  }
});
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n'));
`;

async function measure(extraHeaders: number): Promise<{ bytesPerRequest: number; gcsWhileMeasuring: number }> {
  const child = spawn(
    process.execPath,
    ['--max-semi-space-size=128', '--min-semi-space-size=128', '--initial-old-space-size=256', '-e', SERVER],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string> => {
    const next = await lines.next();
    if (next.done) throw new Error(`the server (${extraHeaders} extra headers) exited before it printed its figures`);
    return next.value;
  };
  const { port } = JSON.parse(await nextLine()) as Pick<AddressInfo, 'port'>;
  const session = http2.connect(`http://127.0.0.1:${port}`);
  let sent = 0;
  let stopped = false;
  const headers = (n: number): http2.OutgoingHttpHeaders => {
    const out: http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': '/envoy.service.auth.v3.Authorization/Check',
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': '250m',
    };
    // A value that changes per request, as x-request-id does; its name repeats.
    for (let i = 0; i < extraHeaders; i += 1) out[`x-extra-${i}`] = `value-${i}-${n}`;
    return out;
  };
  const one = (): void => {
    if (stopped || sent >= WARMUP + MEASURED + IN_FLIGHT) return;
    const request = session.request(headers(sent++));
    request.on('data', () => undefined);
    request.on('end', one);
    request.on('error', () => undefined);
    request.end(Buffer.alloc(300));
  };
  for (let i = 0; i < IN_FLIGHT; i += 1) one();
  const result = JSON.parse(await nextLine()) as { bytesPerRequest: number; gcsWhileMeasuring: number };
  stopped = true;
  session.destroy();
  child.kill();
  return result;
}

async function main(): Promise<void> {
  process.stdout.write('non-static header values per request | old-space bytes allocated directly per request | GCs while measuring\n');
  for (const extra of [0, 1, 2]) {
    const { bytesPerRequest, gcsWhileMeasuring } = await measure(extra);
    // :path, content-type, te and grpc-timeout are not in HPACK's static table with these values; :method POST is.
    // A line with GCs while measuring is not a measurement: a scavenge adds what it promoted, a mark-compact takes away.
    process.stdout.write(`${4 + extra} | ${bytesPerRequest.toFixed(0)} | ${gcsWhileMeasuring}\n`);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`h2-header-strings failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
