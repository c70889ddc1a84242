#!/usr/bin/env node
'use strict';
/**
 * fake-upstream: a tiny stand-in for the LLM API behind Envoy, for
 * docker-compose.yml and the walkthrough in docs/getting-started/compose.md. No dependencies.
 *
 * It answers each client style roughly like the real APIs do (a chat
 * completion, a Messages answer, a generateContent answer, model lists), and
 * shows what actually reached it:
 *   - response header `x-upstream-saw-headers`: JSON array of the request
 *     header names it received (lower-case, sorted);
 *   - in every JSON body: `received_headers` (the same list),
 *     `received_query_params` (query parameter NAMES) and `gateway_identity`
 *     (the x-gateway-* headers gateway-authz set, with their values).
 * So `curl ... | jq .received_headers` shows that no `authorization` /
 * `x-api-key` / `x-goog-api-key` and no `?key=` ever arrived. Values of other
 * headers are never echoed.
 *
 * Env: PORT (default 8081), HOST (default 0.0.0.0).
 */
const http = require('node:http');

const PORT = Number(process.env.PORT || 8081);
const HOST = process.env.HOST || '0.0.0.0';
const MAX_BODY_BYTES = 10 * 1024 * 1024;

const MODELS = {
  chat: ['gpt-4o-mini', 'gpt-4o'],
  messages: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
  generative: ['gemini-2.0-flash', 'gemini-2.5-pro'],
};

function seen(req) {
  const names = [...new Set(Object.keys(req.headers).map((name) => name.toLowerCase()))].sort();
  const url = new URL(req.url, 'http://fake-upstream');
  const identity = {};
  for (const name of names) if (name.startsWith('x-gateway-')) identity[name] = String(req.headers[name]);
  return { names, queryParams: [...new Set(url.searchParams.keys())].sort(), identity, path: url.pathname };
}

function send(res, req, status, body, extraHeaders = {}) {
  const s = seen(req);
  const payload = JSON.stringify({
    ...body,
    received_headers: s.names,
    received_query_params: s.queryParams,
    gateway_identity: s.identity,
  });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    'x-upstream-saw-headers': JSON.stringify(s.names),
    ...extraHeaders,
  });
  res.end(req.method === 'HEAD' ? undefined : payload);
}

function sendEvents(res, req, events) {
  const s = seen(req);
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'x-upstream-saw-headers': JSON.stringify(s.names),
  });
  for (const event of events) res.write(event);
  res.end();
}

const id = (prefix) => `${prefix}${Math.random().toString(36).slice(2, 14)}`;
const now = () => Math.floor(Date.now() / 1000);
const USAGE_TEXT = 'Hello from fake-upstream.';

function chatCompletion(model) {
  return {
    id: id('chatcmpl-'),
    object: 'chat.completion',
    created: now(),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: USAGE_TEXT, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
  };
}

function chatStream(model) {
  const base = { id: id('chatcmpl-'), object: 'chat.completion.chunk', created: now(), model };
  const chunk = (delta, finish) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  return [chunk({ role: 'assistant', content: '' }, null), chunk({ content: USAGE_TEXT }, null), chunk({}, 'stop'), 'data: [DONE]\n\n'];
}

function message(model) {
  return {
    id: id('msg_'),
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: USAGE_TEXT }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 5, output_tokens: 5 },
  };
}

function messageStream(model) {
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const start = message(model);
  return [
    ev('message_start', { message: { ...start, content: [], stop_reason: null, usage: { input_tokens: 5, output_tokens: 0 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: USAGE_TEXT } }),
    ev('content_block_stop', { index: 0 }),
    ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } }),
    ev('message_stop', {}),
  ];
}

function generateContent(model) {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text: USAGE_TEXT }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 5, totalTokenCount: 10 },
    modelVersion: model,
    responseId: id('resp-'),
  };
}

function route(req, body) {
  const { path } = seen(req);
  const method = req.method;
  const post = method === 'POST';
  const get = method === 'GET' || method === 'HEAD';
  const model = typeof body.model === 'string' ? body.model : undefined;

  if (path === '/healthz' && get) return [200, { status: 'ok' }];

  // OpenAI style (also Gemini's OpenAI-compatible /v1beta/openai/...).
  if (post && (path === '/v1/chat/completions' || path === '/v1beta/openai/chat/completions')) {
    if (body.stream === true) return ['stream', chatStream(model || MODELS.chat[0])];
    return [200, chatCompletion(model || MODELS.chat[0])];
  }
  if (post && path === '/v1/completions') {
    return [
      200,
      {
        id: id('cmpl-'),
        object: 'text_completion',
        created: now(),
        model: model || 'gpt-3.5-turbo-instruct',
        choices: [{ index: 0, text: USAGE_TEXT, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
      },
    ];
  }
  if (post && (path === '/v1/embeddings' || path === '/v1beta/openai/embeddings')) {
    return [
      200,
      {
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
        model: model || 'text-embedding-3-small',
        usage: { prompt_tokens: 5, total_tokens: 5 },
      },
    ];
  }
  if (post && path === '/v1/responses') {
    return [
      200,
      {
        id: id('resp_'),
        object: 'response',
        created_at: now(),
        status: 'completed',
        model: model || MODELS.chat[0],
        output: [
          {
            type: 'message',
            id: id('msg_'),
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: USAGE_TEXT, annotations: [] }],
          },
        ],
        usage: { input_tokens: 5, output_tokens: 5, total_tokens: 10 },
      },
    ];
  }

  // Anthropic style.
  if (post && path === '/v1/messages') {
    if (body.stream === true) return ['stream', messageStream(model || MODELS.messages[0])];
    return [200, message(model || MODELS.messages[0])];
  }
  if (post && path === '/v1/messages/count_tokens') return [200, { input_tokens: 5 }];

  // Gemini style: /{v1,v1beta}/models/{model}:{method}
  const generative = /^\/(v1|v1beta)\/models\/([^/:]+):([A-Za-z]+)$/.exec(path);
  if (post && generative) {
    const [, , name, action] = generative;
    if (action === 'generateContent') return [200, generateContent(name)];
    if (action === 'streamGenerateContent') return ['stream', [`data: ${JSON.stringify(generateContent(name))}\n\n`]];
    if (action === 'countTokens') return [200, { totalTokens: 5 }];
    if (action === 'embedContent') return [200, { embedding: { values: [0.1, 0.2, 0.3] } }];
    if (action === 'batchEmbedContents') return [200, { embeddings: (body.requests || [{}]).map(() => ({ values: [0.1, 0.2, 0.3] })) }];
  }

  // Model lists: the shape depends on the style of the caller.
  const modelsPath = /^\/(v1|v1beta)\/models(?:\/([^/:]+))?$/.exec(path);
  if (get && modelsPath) {
    const [, version, single] = modelsPath;
    const style =
      req.headers['anthropic-version'] || req.headers['vendora-version']
        ? 'messages'
        : version === 'v1beta' || req.headers['x-goog-api-key'] || req.headers['x-vendorg-api-key']
          ? 'generative'
          : 'chat';
    if (style === 'generative') {
      const entry = (m) => ({ name: `models/${m}`, displayName: m, supportedGenerationMethods: ['generateContent', 'countTokens'] });
      return [200, single ? entry(single) : { models: MODELS.generative.map(entry) }];
    }
    if (style === 'messages') {
      const entry = (m) => ({ type: 'model', id: m, display_name: m, created_at: '2025-01-01T00:00:00Z' });
      const data = MODELS.messages.map(entry);
      return [200, single ? entry(single) : { data, has_more: false, first_id: data[0].id, last_id: data[data.length - 1].id }];
    }
    const entry = (m) => ({ id: m, object: 'model', created: 1700000000, owned_by: 'fake-upstream' });
    return [200, single ? entry(single) : { object: 'list', data: MODELS.chat.map(entry) }];
  }
  if (get && path === '/v1beta/openai/models') {
    return [200, { object: 'list', data: MODELS.generative.map((m) => ({ id: `models/${m}`, object: 'model', owned_by: 'google' })) }];
  }

  return [404, { error: { message: `fake-upstream has no ${method} ${path}`, type: 'not_found_error', code: 'not_found' } }];
}

function handle(req, res) {
  const chunks = [];
  let size = 0;
  let tooLarge = false;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) tooLarge = true;
    else chunks.push(chunk);
  });
  req.on('end', () => {
    if (tooLarge) return send(res, req, 413, { error: { message: 'request body too large', type: 'invalid_request_error' } });
    let body = {};
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        return send(res, req, 400, { error: { message: 'request body is not valid JSON', type: 'invalid_request_error' } });
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body)) body = {};
    }
    const [status, answer] = route(req, body);
    if (status === 'stream') return sendEvents(res, req, answer);
    return send(res, req, status, answer);
  });
  req.on('error', () => res.destroy());
}

const server = http.createServer(handle);
// Envoy's pool closes idle upstream connections after 50 s (envoy.yaml);
// keep ours open longer so Envoy never reuses a connection we are closing.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;

server.listen(PORT, HOST, () => {
  const address = server.address();
  process.stdout.write(
    `${JSON.stringify({ msg: 'fake-upstream listening', port: typeof address === 'object' && address ? address.port : PORT })}\n`,
  );
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 2_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
