/**
 * The usage processor's CPU per metered answer and memory per open stream,
 * on the real gateway (`node dist/cli/main.js serve`, in-memory store) in a
 * child process, measured from /proc. The driver plays Envoy's ext_proc
 * filter in observability mode on raw node:http2 (so that little of the
 * machine goes to the driver): one Process stream per answer, the request
 * headers with ext_authz's identity, the response headers with request.size,
 * then one ProcessingRequest per SSE event of a ~500-token chat-completions
 * stream with include_usage (an upstream flushes each event, so Envoy sends
 * each in a message of its own), streams interleaved one message at a time.
 *
 *   npm run build && npm run build:bench && node .bench/build/test/bench/ext-proc-cpu.js [answers] [concurrency]
 *
 * `npm run bench` runs the same measurement as one of its phases (main.ts), at a smaller volume.
 */
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as http2 from 'node:http2';
import * as os from 'node:os';
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { OFFICIAL_LOADER_OPTIONS } from '../support/envoy-official-client';
import { cpuSecondsOf, rssBytesOf, waitUntilIdle } from './proc-stats';
import { startGateway } from './processes';

const PROCESS_PATH = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';
const TOKENS = 500;

const definition = (
  protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', OFFICIAL_LOADER_OPTIONS)[
    'envoy.service.ext_proc.v3.ExternalProcessor'
  ] as protoLoader.ServiceDefinition
).Process!;

function frame(message: object): Buffer {
  const bytes = definition.requestSerialize(message);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([prefix, bytes]);
}

const headerMap = (headers: [string, string][]) => ({ headers: headers.map(([key, value]) => ({ key, raw_value: Buffer.from(value) })) });

/** The SSE events of a ~500-token chat-completions stream with include_usage: one body chunk each. */
function chatStreamEvents(): Buffer[] {
  const base = {
    id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
    object: 'chat.completion.chunk',
    created: 1741570283,
    model: 'gpt-4o-mini-2024-07-18',
  };
  const events: string[] = [];
  events.push(
    JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: null }),
  );
  for (let i = 0; i < TOKENS; i += 1) {
    events.push(
      JSON.stringify({
        ...base,
        choices: [{ index: 0, delta: { content: i % 7 === 0 ? ' the' : ' token' }, finish_reason: null }],
        usage: null,
      }),
    );
  }
  events.push(JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null }));
  events.push(
    JSON.stringify({
      ...base,
      choices: [],
      usage: { prompt_tokens: 320, completion_tokens: TOKENS, total_tokens: 320 + TOKENS, prompt_tokens_details: { cached_tokens: 0 } },
    }),
  );
  return [...events.map((event) => Buffer.from(`data: ${event}\n\n`)), Buffer.from('data: [DONE]\n\n')];
}

const EVENTS = chatStreamEvents();
const RESPONSE_HEADERS = frame({
  response_headers: {
    headers: headerMap([
      [':status', '200'],
      ['content-type', 'text/event-stream; charset=utf-8'],
    ]),
    end_of_stream: false,
  },
  attributes: { 'envoy.filters.http.ext_proc': { fields: { 'request.size': { numberValue: 1800 } } } },
  metadata_context: {},
  observability_mode: true,
});
const BODY = EVENTS.map((event, index) =>
  frame({ response_body: { body: event, end_of_stream: index === EVENTS.length - 1 }, metadata_context: {}, observability_mode: true }),
);

function requestHeaders(index: number): Buffer {
  return frame({
    request_headers: {
      headers: headerMap([
        [':authority', 'gateway.example.test'],
        [':path', '/v1/chat/completions'],
        [':method', 'POST'],
        [':scheme', 'http'],
        ['content-type', 'application/json'],
        ['content-length', '1800'],
        ['user-agent', 'OpenAI/JS 6.49.0'],
        ['x-forwarded-proto', 'http'],
        ['x-request-id', `bench-${process.pid}-${index}`],
        ['x-gateway-account-id', 'acme'],
        ['x-gateway-key-id', 'key_ki7sq0QuenAUq8kr'],
        ['x-gateway-key-prefix', 'gk_live_1mm5'],
        ['x-gateway-route-family', 'chat-completions'],
      ]),
      end_of_stream: false,
    },
    metadata_context: {},
    observability_mode: true,
  });
}

interface Driven {
  stream: http2.ClientHttp2Stream;
  next: number;
  frames: Buffer[];
  done: Promise<number>;
}

function open(session: http2.ClientHttp2Session, index: number, messages: number): Driven {
  const stream = session.request(
    { ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' },
    { endStream: false },
  );
  const done = new Promise<number>((resolve) => {
    let status = -1;
    stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => (status = Number(trailers['grpc-status'])));
    stream.on('response', (headers) => headers['grpc-status'] !== undefined && (status = Number(headers['grpc-status'])));
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('close', () => resolve(status));
  });
  return { stream, next: 0, frames: [requestHeaders(index), RESPONSE_HEADERS, ...BODY].slice(0, messages), done };
}

/** `answers` streams, `concurrency` at a time, each sending one message per turn of the driver's loop. */
async function drive(
  address: string,
  answers: number,
  concurrency: number,
  messagesPerStream = EXT_PROC_MESSAGES_PER_ANSWER,
): Promise<number[]> {
  const sessions = Array.from({ length: 4 }, () => http2.connect(`http://${address}`, { maxSessionMemory: 256 }));
  for (const session of sessions) session.on('error', () => undefined);
  const statuses: number[] = [];
  let started = 0;
  const active = new Set<Driven>();
  const pending: Promise<void>[] = [];
  const start = () => {
    const driven = open(sessions[started % sessions.length]!, started, messagesPerStream);
    started += 1;
    active.add(driven);
    pending.push(driven.done.then((status) => void statuses.push(status)));
  };
  while (started < Math.min(concurrency, answers)) start();
  while (active.size > 0) {
    for (const driven of [...active]) {
      // Flow control, as Envoy's side stream has: a stream whose writes are not yet taken waits its turn.
      if (driven.stream.writableLength > 64 * 1024) continue;
      driven.stream.write(driven.frames[driven.next++]!);
      if (driven.next === driven.frames.length) {
        active.delete(driven);
        if (started < answers) start();
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(pending);
  for (const session of sessions) session.close();
  return statuses;
}

export interface ExtProcCpuOptions {
  /** Measured answers, after a warm-up of 300. */
  answers: number;
  /** Streams open at once while measuring CPU. */
  concurrency: number;
  /** Streams held open mid-answer for the memory reading. */
  heldStreams: number;
}

export interface ExtProcCpuResult {
  answers: number;
  concurrency: number;
  messagesPerAnswer: number;
  bodyBytesPerAnswer: number;
  okStatuses: number;
  statusCounts: Record<string, number>;
  meteredWithUsage: number;
  elapsedSeconds: number;
  answersPerSecond: number;
  gatewayCpuSeconds: number;
  cpuMsPerAnswer: number;
  cpuUsPerMessage: number;
  openStreamsHeld: number;
  rssPerOpenStreamKiB: number;
  heapPerOpenStreamKiB: number;
  loadAverage: number[];
}

/** The messages each measured answer sends: request headers, response headers, one per SSE event. */
export const EXT_PROC_MESSAGES_PER_ANSWER = 2 + BODY.length;

/** Starts its own gateway (in-memory store), measures memory per open stream, then CPU per metered answer, and stops it. */
export async function measureExtProcCpu({ answers, concurrency, heldStreams }: ExtProcCpuOptions): Promise<ExtProcCpuResult> {
  const logFile = path.join(os.tmpdir(), `ext-proc-cpu-${process.pid}.log`);
  const gateway = await startGateway({ LOG_LEVEL: 'warn', EXT_PROC_MAX_STREAMS: '100000' }, logFile);
  try {
    // Memory first, on the fresh process: streams left open half-way through their answer.
    const memory = await heldStreamMemory(gateway.grpcAddress, gateway.pid, gateway.adminUrl!, heldStreams);
    // Warm-up (JIT), then the measured run.
    await drive(gateway.grpcAddress, 300, concurrency);
    await waitUntilIdle(gateway.pid);
    // The counter includes the warm-up's answers: only the measured run's count.
    const meteredBefore = await meteredComplete(gateway.adminUrl!);
    const cpuBefore = cpuSecondsOf(gateway.pid);
    const started = Date.now();
    const statuses = await drive(gateway.grpcAddress, answers, concurrency);
    const elapsed = (Date.now() - started) / 1000;
    const cpu = cpuSecondsOf(gateway.pid) - cpuBefore;
    const ok = statuses.filter((status) => status === 0).length;
    const metered = (await meteredComplete(gateway.adminUrl!)) - meteredBefore;

    return {
      answers,
      concurrency,
      messagesPerAnswer: EXT_PROC_MESSAGES_PER_ANSWER,
      bodyBytesPerAnswer: EVENTS.reduce((sum, event) => sum + event.length, 0),
      okStatuses: ok,
      statusCounts: statuses.reduce<Record<string, number>>((counts, status) => ({ ...counts, [status]: (counts[status] ?? 0) + 1 }), {}),
      meteredWithUsage: metered,
      elapsedSeconds: Number(elapsed.toFixed(2)),
      answersPerSecond: Math.round(answers / elapsed),
      gatewayCpuSeconds: Number(cpu.toFixed(2)),
      cpuMsPerAnswer: Number(((cpu * 1000) / answers).toFixed(3)),
      cpuUsPerMessage: Number(((cpu * 1e6) / (answers * EXT_PROC_MESSAGES_PER_ANSWER)).toFixed(2)),
      ...memory,
      loadAverage: os.loadavg().map((load) => Number(load.toFixed(1))),
    };
  } finally {
    await gateway.stop();
    fs.rmSync(logFile, { force: true });
  }
}

/** Chat-completions answers metered with the reported usage, delivered complete, so far. */
async function meteredComplete(adminUrl: string): Promise<number> {
  const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
  return Number(
    /^gateway_authz_ext_proc_responses_total\{family="chat-completions",outcome="usage",delivery="complete"\} (\d+)/m.exec(metrics)?.[1] ??
      0,
  );
}

/** Memory growth per stream while `held` streams are open mid-answer (10 of their body chunks read). */
async function heldStreamMemory(
  address: string,
  pid: number,
  adminUrl: string,
  held: number,
): Promise<{ openStreamsHeld: number; rssPerOpenStreamKiB: number; heapPerOpenStreamKiB: number }> {
  await waitUntilIdle(pid);
  const heapUsed = async () =>
    Number(/^gateway_authz_nodejs_heap_size_used_bytes (\d+)/m.exec(await (await fetch(`${adminUrl}/metrics`)).text())?.[1]);
  const heapBefore = await heapUsed();
  const rssBefore = rssBytesOf(pid);
  // Enough connections for every held stream to be open at the gateway: past its SETTINGS_MAX_CONCURRENT_STREAMS a stream waits in the client.
  const connect = () => {
    const session = http2.connect(`http://${address}`, { maxSessionMemory: 256 });
    session.on('error', () => undefined);
    return session;
  };
  const first = connect();
  await once(first, 'remoteSettings');
  const perSession = first.remoteSettings.maxConcurrentStreams ?? held;
  const sessions = [first, ...Array.from({ length: Math.ceil(held / perSession) - 1 }, connect)];
  const streams = Array.from({ length: held }, (_, i) => {
    const stream = sessions[i % sessions.length]!.request({
      ':method': 'POST',
      ':path': PROCESS_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    stream.write(Buffer.concat([requestHeaders(1_000_000 + i), RESPONSE_HEADERS, ...BODY.slice(0, 10)]));
    return stream;
  });
  await waitUntilIdle(pid, 20_000);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // Per stream the gateway really holds (its own gauge), not per stream asked for.
  const open = Number(/^gateway_authz_ext_proc_streams_open (\d+)/m.exec(await (await fetch(`${adminUrl}/metrics`)).text())?.[1]);
  const rssHeld = rssBytesOf(pid);
  const heapHeld = await heapUsed();
  for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL);
  for (const session of sessions) session.close();
  await waitUntilIdle(pid);
  return {
    openStreamsHeld: open,
    rssPerOpenStreamKiB: Math.round((rssHeld - rssBefore) / open / 1024),
    heapPerOpenStreamKiB: Math.round((heapHeld - heapBefore) / open / 1024),
  };
}

if (require.main === module) {
  measureExtProcCpu({ answers: Number(process.argv[2] ?? 5000), concurrency: Number(process.argv[3] ?? 64), heldStreams: 4000 })
    .then((report) => process.stdout.write(`${JSON.stringify(report, null, 2)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exit(1);
    });
}
