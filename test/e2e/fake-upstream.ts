/**
 * TEST CODE: the upstream LLM APIs behind the gateway. Records every request
 * it receives (so tests can prove what reached the upstream: never a
 * credential, always the identity headers) and answers like the real APIs
 * closely enough for the official SDKs to parse the answer: OpenAI-style
 * chat/completions/embeddings/responses, Anthropic-style messages (with SSE
 * events), Gemini-style generateContent (with `alt=sse`), and the three
 * shapes of the shared models listing.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface FakeUpstream {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

type Answer = { kind: 'json'; status: number; body: unknown } | { kind: 'sse'; events: string[] };

function json(body: unknown, status = 200): Answer {
  return { kind: 'json', status, body };
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

// ---------------------------------------------------------------------------
// OpenAI style

function chatCompletion(model: string): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

function chatCompletionChunks(model: string): string[] {
  const chunk = (delta: object, finish: string | null) =>
    JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  return [
    `data: ${chunk({ role: 'assistant', content: '' }, null)}\n\n`,
    `data: ${chunk({ content: 'h' }, null)}\n\n`,
    `data: ${chunk({ content: 'i' }, null)}\n\n`,
    `data: ${chunk({}, 'stop')}\n\n`,
    'data: [DONE]\n\n',
  ];
}

function completion(model: string): unknown {
  return {
    id: 'cmpl-1',
    object: 'text_completion',
    created: 1,
    model,
    choices: [{ index: 0, text: 'hi', logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

function embeddings(model: string): unknown {
  return {
    object: 'list',
    data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }],
    model,
    usage: { prompt_tokens: 1, total_tokens: 1 },
  };
}

function responsesObject(model: string, id = 'resp_1'): unknown {
  return {
    id,
    object: 'response',
    created_at: 1,
    status: 'completed',
    model,
    output: [
      {
        type: 'message',
        id: 'msg_1',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'hi', annotations: [] }],
      },
    ],
    output_text: 'hi',
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  };
}

// ---------------------------------------------------------------------------
// Anthropic style

function message(model: string): unknown {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: 'hi' }],
    model,
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
}

function messageEvents(model: string): string[] {
  const event = (name: string, data: object) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
  return [
    event('message_start', {
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        content: [],
        model,
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 0 },
      },
    }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'hi' } }),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } }),
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

function generateContent(model: string, text = 'hi'): unknown {
  return {
    candidates: [{ content: { parts: [{ text }], role: 'model' }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 },
    modelVersion: model,
  };
}

// ---------------------------------------------------------------------------

const GENERATIVE = /^\/(v1beta|v1)\/models\/([^/:]+):([A-Za-z]+)$/;
const MODELS = /^\/(v1beta|v1)\/models(?:\/([^/:]+))?$/;

function modelsAnswer(version: string, id: string | undefined, headers: http.IncomingHttpHeaders): Answer {
  // Credentials are stripped before the upstream, so the style comes from the
  // version header (Anthropic) and the path (/v1beta → Gemini).
  const anthropic = headers['anthropic-version'] !== undefined || headers['vendora-version'] !== undefined;
  if (anthropic && version === 'v1') {
    if (id === undefined) return json({ data: [ANTHROPIC_MODEL], has_more: false, first_id: 'claude-x', last_id: 'claude-x' });
    return json({ ...ANTHROPIC_MODEL, id });
  }
  if (version === 'v1beta') {
    if (id === undefined) return json({ models: [GEMINI_MODEL] });
    return json({ ...GEMINI_MODEL, name: `models/${id}` });
  }
  if (id === undefined) return json({ object: 'list', data: [OPENAI_MODEL] });
  return json({ ...OPENAI_MODEL, id });
}

function answer(method: string, target: string, headers: http.IncomingHttpHeaders, bodyText: string): Answer {
  const url = new URL(target, 'http://upstream.invalid');
  const path = url.pathname;
  const body = parseBody(bodyText);
  const model = typeof body.model === 'string' ? body.model : 'model-x';
  const stream = body.stream === true;

  if (method === 'POST') {
    if (path === '/v1/chat/completions' || path === '/v1beta/openai/chat/completions') {
      return stream ? { kind: 'sse', events: chatCompletionChunks(model) } : json(chatCompletion(model));
    }
    if (path === '/v1/completions') return json(completion(model));
    if (path === '/v1/embeddings' || path === '/v1beta/openai/embeddings') return json(embeddings(model));
    if (path === '/v1/responses') return json(responsesObject(model));
    if (path === '/v1/messages') return stream ? { kind: 'sse', events: messageEvents(model) } : json(message(model));
    if (path === '/v1/messages/count_tokens') return json({ input_tokens: 3 });
    if (path === '/v1/messages/batches') return json(messageBatch());
    const generative = GENERATIVE.exec(path);
    if (generative) {
      const [, , name, operation] = generative;
      switch (operation) {
        case 'generateContent':
          return json(generateContent(name!));
        case 'streamGenerateContent':
          return {
            kind: 'sse',
            events: [
              `data: ${JSON.stringify(generateContent(name!, 'h'))}\r\n\r\n`,
              `data: ${JSON.stringify(generateContent(name!, 'i'))}\r\n\r\n`,
            ],
          };
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
    const models = MODELS.exec(path);
    if (models) return modelsAnswer(models[1]!, models[2], headers);
    const response = /^\/v1\/responses\/([^/]+)$/.exec(path);
    if (response) return json(responsesObject('model-x', response[1]));
    const batch = /^\/v1\/messages\/batches\/([^/]+)$/.exec(path);
    if (batch) return json(messageBatch(batch[1]));
  }
  return json({ error: { type: 'not_found', message: `fake upstream: no route for ${method} ${path}` } }, 404);
}

export interface FakeUpstreamOptions {
  /** Pause between two SSE events (default 5 ms), so a stream really streams. */
  sseEventGapMs?: number;
}

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const gapMs = options.sseEventGapMs ?? 5;
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const method = req.method ?? 'GET';
      const path = req.url ?? '/';
      requests.push({ method, path, headers: { ...req.headers }, body });
      const result = answer(method, path, req.headers, body);
      if (result.kind === 'json') {
        const text = JSON.stringify(result.body);
        res.writeHead(result.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      // One write per event, a pause apart, so the stream really streams.
      const events = [...result.events];
      const next = (): void => {
        const event = events.shift();
        if (event === undefined) {
          res.end();
          return;
        }
        res.write(event);
        setTimeout(next, gapMs);
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
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
