/**
 * TEST CODE: the upstream LLM APIs behind the gateway. Records every request
 * it receives (so tests can prove what reached the upstream: never a
 * credential, always the identity headers) and what it answered, and answers
 * like the real APIs closely enough for the official SDKs to parse the
 * answer: OpenAI-style chat/completions/embeddings/responses, Anthropic-style
 * messages, Gemini-style generateContent, and the three shapes of the shared
 * models listing.
 *
 * Usage. Every generation answer reports `usage` (settable per upstream, or
 * per test through `upstream.usage`), in each style's own fields, so that
 * the counts the usage extractor reads are exactly `usage` (and the request
 * record's `reportedUsage` says what was reported):
 *  - chat completions and completions: `usage` (prompt_tokens = input +
 *    cached + cache writes, with prompt_tokens_details); streamed, only with
 *    `stream_options.include_usage` (a final `choices: []` chunk, every
 *    other chunk `"usage": null`), as OpenAI does; without it the stream
 *    reports nothing;
 *  - embeddings: `prompt_tokens` (input only);
 *  - Responses API: `usage`; streamed, in `response.completed`;
 *  - messages: `usage`; streamed, `message_start` (input and cache counts,
 *    output 1) then the cumulative `message_delta` (output);
 *  - generateContent: `usageMetadata`; streamed, in every chunk (running
 *    output count, the last chunk final), as server-sent events with
 *    `alt=sse`, else as one JSON array written element by element. Gemini
 *    reports no cache writes: `reportedUsage` has 0 there.
 *
 * Model names pick other answers (the SDKs pass the model through; Gemini's
 * is in the path):
 *  - `…-error-<status>` (e.g. `gpt-error-429`): that status with the style's
 *    error body, no usage;
 *  - `…slow…`: a streamed answer of SLOW_STREAM_PIECES text pieces,
 *    `slowEventGapMs` apart, usage as above (so a client can go away
 *    mid-stream);
 *  - `fixture-<name>`: the bytes of test/fixtures/usage/<name>.sse or .json,
 *    written event by event (or element by element), reporting what
 *    USAGE_FIXTURE_CASES says the fixture reports.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';

import type { TokenCounts } from '../../src/metering/usage';
import { USAGE_FIXTURE_CASES } from '../support/usage-fixtures';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The status answered. */
  status?: number;
  /** Every byte of the answer's body written so far, write by write. */
  responseChunks: Buffer[];
  /** The usage the answer reports (absent: an error, a request that is not a generation, or a stream without usage). */
  reportedUsage?: TokenCounts;
  /** The whole answer was written (false while streaming, or when the connection went away first). */
  completed: boolean;
}

export interface FakeUpstream {
  url: string;
  requests: RecordedRequest[];
  /** The usage every generation answer reports from now on. */
  usage: TokenCounts;
  /** The request carrying this x-request-id (Envoy's, forwarded upstream). */
  requestWithId(requestId: string): RecordedRequest | undefined;
  close(): Promise<void>;
}

export const DEFAULT_FAKE_USAGE: TokenCounts = Object.freeze({
  inputTokens: 11,
  outputTokens: 7,
  cachedInputTokens: 0,
  cacheCreationTokens: 0,
});
/** Text pieces of a slow stream. */
export const SLOW_STREAM_PIECES = 40;
const FIXTURES_DIR = path.join(__dirname, '..', 'fixtures', 'usage');

/** The body of one answer: whole (JSON, content-length) or written piece by piece. */
type Answer =
  | { kind: 'json'; status: number; body: unknown; usage?: TokenCounts }
  | { kind: 'stream'; contentType: string; pieces: string[]; gapMs?: number; usage?: TokenCounts };

function json(body: unknown, status = 200, usage?: TokenCounts): Answer {
  return { kind: 'json', status, body, ...(usage ? { usage } : {}) };
}

function parseBody(text: string): Record<string, unknown> {
  if (text === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const OPENAI_MODEL = { id: 'gpt-x', object: 'model', created: 1, owned_by: 'x' };
const ANTHROPIC_MODEL = { type: 'model', id: 'claude-x', display_name: 'Claude X', created_at: '2025-01-01T00:00:00Z' };
const GEMINI_MODEL = { name: 'models/gemini-x', displayName: 'Gemini X' };

/** What a generated answer says and how it streams. */
interface Generation {
  model: string;
  usage: TokenCounts;
  /** The text, in the pieces a stream sends. */
  pieces: string[];
  gapMs?: number;
}

const sse = (data: unknown, event?: string): string => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

// ---------------------------------------------------------------------------
// OpenAI style

function chatUsage(u: TokenCounts): object {
  const prompt = u.inputTokens + u.cachedInputTokens + u.cacheCreationTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: u.outputTokens,
    total_tokens: prompt + u.outputTokens,
    prompt_tokens_details: {
      cached_tokens: u.cachedInputTokens,
      ...(u.cacheCreationTokens > 0 ? { cache_write_tokens: u.cacheCreationTokens } : {}),
    },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

function chatCompletion(g: Generation): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: g.model,
    choices: [{ index: 0, message: { role: 'assistant', content: g.pieces.join('') }, finish_reason: 'stop' }],
    usage: chatUsage(g.usage),
  };
}

function chatCompletionChunks(g: Generation, includeUsage: boolean): string[] {
  const chunk = (choices: object[], usage?: object) =>
    sse({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: g.model,
      choices,
      ...(includeUsage ? { usage: usage ?? null } : {}),
    });
  const delta = (content: object, finish: string | null) => [{ index: 0, delta: content, finish_reason: finish }];
  return [
    chunk(delta({ role: 'assistant', content: '' }, null)),
    ...g.pieces.map((piece) => chunk(delta({ content: piece }, null))),
    chunk(delta({}, 'stop')),
    ...(includeUsage ? [chunk([], chatUsage(g.usage))] : []),
    'data: [DONE]\n\n',
  ];
}

function completion(g: Generation): unknown {
  return {
    id: 'cmpl-1',
    object: 'text_completion',
    created: 1,
    model: g.model,
    choices: [{ index: 0, text: g.pieces.join(''), logprobs: null, finish_reason: 'stop' }],
    usage: chatUsage(g.usage),
  };
}

function embeddings(model: string, inputTokens: number): unknown {
  return {
    object: 'list',
    data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }],
    model,
    usage: { prompt_tokens: inputTokens, total_tokens: inputTokens },
  };
}

function responsesUsage(u: TokenCounts): object {
  const input = u.inputTokens + u.cachedInputTokens + u.cacheCreationTokens;
  return {
    input_tokens: input,
    input_tokens_details: {
      cached_tokens: u.cachedInputTokens,
      ...(u.cacheCreationTokens > 0 ? { cache_write_tokens: u.cacheCreationTokens } : {}),
    },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + u.outputTokens,
  };
}

function responsesObject(
  model: string,
  id: string,
  text: string,
  usage: TokenCounts | null,
  status = 'completed',
): Record<string, unknown> {
  return {
    id,
    object: 'response',
    created_at: 1,
    status,
    model,
    output:
      status === 'completed'
        ? [
            {
              type: 'message',
              id: 'msg_1',
              status: 'completed',
              role: 'assistant',
              content: [{ type: 'output_text', text, annotations: [] }],
            },
          ]
        : [],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage: usage ? responsesUsage(usage) : null,
  };
}

function responsesEvents(g: Generation): string[] {
  let sequence = 0;
  const event = (type: string, data: object) => sse({ type, sequence_number: sequence++, ...data }, type);
  const text = g.pieces.join('');
  return [
    event('response.created', { response: responsesObject(g.model, 'resp_1', '', null, 'in_progress') }),
    ...g.pieces.map((delta) => event('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta })),
    event('response.output_text.done', { item_id: 'msg_1', output_index: 0, content_index: 0, text }),
    event('response.completed', { response: responsesObject(g.model, 'resp_1', text, g.usage) }),
  ];
}

// ---------------------------------------------------------------------------
// Anthropic style

function messagesUsage(u: TokenCounts, outputTokens = u.outputTokens): object {
  return {
    input_tokens: u.inputTokens,
    output_tokens: outputTokens,
    cache_read_input_tokens: u.cachedInputTokens,
    cache_creation_input_tokens: u.cacheCreationTokens,
  };
}

function message(g: Generation): unknown {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: g.pieces.join('') }],
    model: g.model,
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: messagesUsage(g.usage),
  };
}

function messageEvents(g: Generation): string[] {
  const event = (name: string, data: object) => sse({ type: name, ...data }, name);
  return [
    event('message_start', {
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        content: [],
        model: g.model,
        stop_reason: null,
        stop_sequence: null,
        // As Anthropic's: the input and cache counts, and a first output count.
        usage: messagesUsage(g.usage, 1),
      },
    }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ...g.pieces.map((text) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: g.usage.outputTokens } }),
    event('message_stop', {}),
  ];
}

function messageBatch(id = 'msgbatch_1'): unknown {
  return {
    id,
    type: 'message_batch',
    processing_status: 'in_progress',
    request_counts: { processing: 1, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
    ended_at: null,
    created_at: '2025-01-01T00:00:00Z',
    expires_at: '2025-01-02T00:00:00Z',
    archived_at: null,
    cancel_initiated_at: null,
    results_url: null,
  };
}

// ---------------------------------------------------------------------------
// Gemini style

function usageMetadata(u: TokenCounts, candidates = u.outputTokens): object {
  const prompt = u.inputTokens + u.cachedInputTokens;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: prompt + candidates,
    ...(u.cachedInputTokens > 0 ? { cachedContentTokenCount: u.cachedInputTokens } : {}),
  };
}

function generateContent(model: string, text: string, metadata: object, finished: boolean): unknown {
  return {
    candidates: [{ content: { parts: [{ text }], role: 'model' }, ...(finished ? { finishReason: 'STOP' } : {}), index: 0 }],
    usageMetadata: metadata,
    modelVersion: model,
  };
}

/** Every chunk carries the running usage; the last one the final counts and the finish reason. */
function generateContentChunks(g: Generation): unknown[] {
  return g.pieces.map((piece, i) => {
    const last = i === g.pieces.length - 1;
    const candidates = last ? g.usage.outputTokens : Math.floor((g.usage.outputTokens * (i + 1)) / g.pieces.length);
    return generateContent(g.model, piece, usageMetadata(g.usage, candidates), last);
  });
}

/** The JSON array stream (no alt=sse): `[`, the elements separated by `,\r\n`, `]`, written element by element. */
function jsonArrayPieces(elements: unknown[]): string[] {
  return elements.map((element, i) => `${i === 0 ? '[' : ',\r\n'}${JSON.stringify(element)}${i === elements.length - 1 ? ']' : ''}`);
}

// ---------------------------------------------------------------------------
// Errors, fixtures

type Style = 'chat-completions' | 'messages' | 'generative-content';

function styleOf(pathname: string): Style {
  if (pathname.startsWith('/v1/messages')) return 'messages';
  if (/^\/(v1beta|v1)\/models\//.test(pathname)) return 'generative-content';
  return 'chat-completions';
}

function errorAnswer(style: Style, status: number): Answer {
  const message = `fake upstream: error ${status} on purpose`;
  switch (style) {
    case 'messages': {
      const type =
        status === 429 ? 'rate_limit_error' : status === 529 ? 'overloaded_error' : status >= 500 ? 'api_error' : 'invalid_request_error';
      return json({ type: 'error', error: { type, message } }, status);
    }
    case 'generative-content': {
      const grpcStatus =
        status === 429 ? 'RESOURCE_EXHAUSTED' : status === 503 ? 'UNAVAILABLE' : status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT';
      return json({ error: { code: status, message, status: grpcStatus } }, status);
    }
    default:
      return json({ error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } }, status);
  }
}

/** `fixture-<name>`: a fixture's bytes, cut where its events (or array elements) end. */
function fixtureAnswer(name: string): Answer | undefined {
  const fixture = USAGE_FIXTURE_CASES.find((c) => c.fixture.replace(/\.(sse|json)$/, '') === name);
  if (!fixture) return undefined;
  const text = fs.readFileSync(path.join(FIXTURES_DIR, fixture.fixture), 'utf8');
  const usage = fixture.expected.kind === 'reported' ? fixture.expected.tokens : undefined;
  const contentType = fixture.response.contentType ?? 'application/json';
  if (fixture.fixture.endsWith('.sse')) {
    const pieces = text.split(/(?<=\r?\n\r?\n)/).filter((piece) => piece.length > 0);
    return { kind: 'stream', contentType, pieces, ...(usage ? { usage } : {}) };
  }
  if (text.trimStart().startsWith('[')) {
    const pieces = text.split(/(?=\n,\r?\n)/);
    return { kind: 'stream', contentType, pieces, ...(usage ? { usage } : {}) };
  }
  return json(JSON.parse(text), 200, usage);
}

// ---------------------------------------------------------------------------

const GENERATIVE = /^\/(v1beta|v1)\/models\/([^/:]+):([A-Za-z]+)$/;
const MODELS = /^\/(v1beta|v1)\/models(?:\/([^/:]+))?$/;

function modelsAnswer(version: string, id: string | undefined, headers: http.IncomingHttpHeaders): Answer {
  // Credentials are stripped before the upstream, so the style comes from the
  // version header (Anthropic), the path (/v1beta → Gemini) and Google's client header.
  const anthropic = headers['anthropic-version'] !== undefined || headers['vendora-version'] !== undefined;
  if (anthropic && version === 'v1') {
    if (id === undefined) return json({ data: [ANTHROPIC_MODEL], has_more: false, first_id: 'claude-x', last_id: 'claude-x' });
    return json({ ...ANTHROPIC_MODEL, id });
  }
  // Google's SDKs name themselves in x-goog-api-client; genai 3 lists models on v1.
  if (version === 'v1beta' || headers['x-goog-api-client'] !== undefined) {
    if (id === undefined) return json({ models: [GEMINI_MODEL] });
    return json({ ...GEMINI_MODEL, name: `models/${id}` });
  }
  if (id === undefined) return json({ object: 'list', data: [OPENAI_MODEL] });
  return json({ ...OPENAI_MODEL, id });
}

interface AnswerSettings {
  usage: TokenCounts;
  slowEventGapMs: number;
}

function answer(method: string, target: string, headers: http.IncomingHttpHeaders, bodyText: string, settings: AnswerSettings): Answer {
  const url = new URL(target, 'http://upstream.invalid');
  const pathname = url.pathname;
  const body = parseBody(bodyText);
  const generative = GENERATIVE.exec(pathname);
  const model = generative ? generative[2]! : typeof body.model === 'string' ? body.model : 'model-x';
  const stream = body.stream === true;

  if (method === 'POST') {
    const error = /-error-(\d{3})\b/.exec(model);
    if (error) return errorAnswer(styleOf(pathname), Number(error[1]));
    if (model.startsWith('fixture-')) {
      const fixture = fixtureAnswer(model.slice('fixture-'.length));
      if (fixture) return fixture;
    }
    const slow = model.includes('slow');
    const g: Generation = {
      model,
      usage: settings.usage,
      pieces: slow ? Array.from({ length: SLOW_STREAM_PIECES }, (_, i) => `piece ${i} `) : ['h', 'i'],
      ...(slow ? { gapMs: settings.slowEventGapMs } : {}),
    };
    const events = (contentType: string, pieces: string[], usage?: TokenCounts): Answer => ({
      kind: 'stream',
      contentType,
      pieces,
      ...(g.gapMs !== undefined ? { gapMs: g.gapMs } : {}),
      ...(usage ? { usage } : {}),
    });
    const SSE = 'text/event-stream; charset=utf-8';

    if (pathname === '/v1/chat/completions' || pathname === '/v1beta/openai/chat/completions') {
      if (!stream) return json(chatCompletion(g), 200, g.usage);
      const streamOptions = body.stream_options as { include_usage?: unknown } | undefined;
      const includeUsage = streamOptions?.include_usage === true;
      return events(SSE, chatCompletionChunks(g, includeUsage), includeUsage ? g.usage : undefined);
    }
    if (pathname === '/v1/completions') return json(completion(g), 200, g.usage);
    if (pathname === '/v1/embeddings' || pathname === '/v1beta/openai/embeddings') {
      const input = { ...g.usage, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 };
      return json(embeddings(model, input.inputTokens), 200, input);
    }
    if (pathname === '/v1/responses') {
      return stream
        ? events(SSE, responsesEvents(g), g.usage)
        : json(responsesObject(model, 'resp_1', g.pieces.join(''), g.usage), 200, g.usage);
    }
    if (pathname === '/v1/messages') return stream ? events(SSE, messageEvents(g), g.usage) : json(message(g), 200, g.usage);
    if (pathname === '/v1/messages/count_tokens') return json({ input_tokens: 3 });
    if (pathname === '/v1/messages/batches') return json(messageBatch());
    if (generative) {
      const reported = { ...g.usage, cacheCreationTokens: 0 };
      switch (generative[3]) {
        case 'generateContent':
          return json(generateContent(model, g.pieces.join(''), usageMetadata(g.usage), true), 200, reported);
        case 'streamGenerateContent': {
          const chunks = generateContentChunks(g);
          return url.searchParams.get('alt') === 'sse'
            ? events(
                'text/event-stream',
                chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`),
                reported,
              )
            : events('application/json; charset=UTF-8', jsonArrayPieces(chunks), reported);
        }
        case 'countTokens':
          return json({ totalTokens: 3 });
        case 'embedContent':
          return json({ embedding: { values: [0.1, 0.2] } });
        case 'batchEmbedContents':
          return json({ embeddings: [{ values: [0.1, 0.2] }] });
      }
    }
  }
  if (method === 'GET') {
    const models = MODELS.exec(pathname);
    if (models) return modelsAnswer(models[1]!, models[2], headers);
    const response = /^\/v1\/responses\/([^/]+)$/.exec(pathname);
    if (response) return json(responsesObject('model-x', response[1]!, 'hi', settings.usage));
    const batch = /^\/v1\/messages\/batches\/([^/]+)$/.exec(pathname);
    if (batch) return json(messageBatch(batch[1]));
  }
  return json({ error: { type: 'not_found', message: `fake upstream: no route for ${method} ${pathname}` } }, 404);
}

export interface FakeUpstreamOptions {
  /** Pause between two streamed pieces (default 5 ms), so a stream really streams. */
  sseEventGapMs?: number;
  /** Pause between the pieces of a slow stream (a model name with `slow`), default 100 ms. */
  slowEventGapMs?: number;
  /** The usage every generation answer reports (default DEFAULT_FAKE_USAGE); also settable on the upstream. */
  usage?: TokenCounts;
}

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const gapMs = options.sseEventGapMs ?? 5;
  const requests: RecordedRequest[] = [];
  const settings: AnswerSettings = { usage: options.usage ?? DEFAULT_FAKE_USAGE, slowEventGapMs: options.slowEventGapMs ?? 100 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const method = req.method ?? 'GET';
      const target = req.url ?? '/';
      const record: RecordedRequest = { method, path: target, headers: { ...req.headers }, body, responseChunks: [], completed: false };
      requests.push(record);
      const result = answer(method, target, req.headers, body, settings);
      if (result.usage) record.reportedUsage = result.usage;
      if (result.kind === 'json') {
        const text = Buffer.from(JSON.stringify(result.body), 'utf8');
        record.status = result.status;
        res.writeHead(result.status, { 'content-type': 'application/json', 'content-length': text.length });
        record.responseChunks.push(text);
        res.end(text, () => (record.completed = true));
        return;
      }
      record.status = 200;
      res.writeHead(200, { 'content-type': result.contentType, 'cache-control': 'no-cache' });
      res.flushHeaders();
      // One write per piece, a pause apart, so the stream really streams; stop when the connection goes away.
      const pieces = [...result.pieces];
      let timer: NodeJS.Timeout | undefined;
      res.on('close', () => clearTimeout(timer));
      const next = (): void => {
        if (res.destroyed) return;
        const piece = pieces.shift();
        if (piece === undefined) {
          res.end(() => (record.completed = true));
          return;
        }
        const bytes = Buffer.from(piece, 'utf8');
        record.responseChunks.push(bytes);
        if (pieces.length === 0) {
          // The last piece ends the answer in the same write, as a real upstream's does: a client that stops reading at
          // `data: [DONE]` (openai 7 closes its connection there) must not cut an answer that is already whole.
          res.end(bytes, () => (record.completed = true));
          return;
        }
        res.write(bytes);
        timer = setTimeout(next, result.gapMs ?? gapMs);
      };
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get usage() {
      return settings.usage;
    },
    set usage(counts: TokenCounts) {
      settings.usage = counts;
    },
    requestWithId: (requestId) => requests.find((r) => r.headers['x-request-id'] === requestId),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
