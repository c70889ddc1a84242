import type { RouteFamily } from '../check/routes/route';
import { routingPath } from '../check/routes/classify';
import { isPlausibleModelName } from './requested-model';
import { isTokenCount, type MalformedUsageReason, type NoUsageReason, type TokenCounts, type UsageReading } from './usage';
import { DEFAULT_HOLD_OUTPUT_TOKENS } from '../accounts/credit-holds';
import { JsonScanner, WatchTree, type ScannedDocument, type WatchSpec } from './json-scanner';
import { SseJsonReader } from './sse-reader';
import {
  chatCompletionsTokens,
  emptyGenerativeSnapshot,
  emptyMessagesSnapshot,
  generativeTokens,
  isMalformed,
  isResponsesShape,
  messagesTokens,
  overlayGenerativeUsage,
  overlayMessagesUsage,
  responsesTokens,
  type ShapeReading,
} from './usage-shapes';

/**
 * Reads the token usage of one upstream response from its body, fed in the
 * chunks Envoy's ext_proc delivers (any boundaries, even inside a UTF-8
 * character). Memory is bounded whatever the body's size (see
 * json-scanner.ts), CPU is one pass over the bytes, and nothing here throws
 * on any input: a body without usable usage gives a reading of kind `none`
 * with the reason.
 */
export interface UsageExtractor {
  /** False when the response headers alone decided the reading (not metered, an error status, a body it cannot read): no chunk need be written. */
  readonly readsBody: boolean;
  write(chunk: Uint8Array): void;
  /**
   * What the body said, as far as it was delivered: call it at end of stream,
   * or when the client went away (a cut-off stream then reports its last
   * running count, e.g. Anthropic's cumulative output tokens).
   */
  finish(): UsageReading;
}

export interface ResponseDescription {
  readonly family: RouteFamily;
  /** The request's method and path (without the query): which requests are metered. */
  readonly method: string;
  readonly path: string;
  readonly status: number;
  /** The response's `content-type`, absent when it has none. */
  readonly contentType: string | undefined;
  /** The response's `content-encoding`: only an unencoded body can be read. */
  readonly contentEncoding: string | undefined;
}

/**
 * The requests that generate billable tokens: a POST to a path that ends in
 * a generation or embedding endpoint. Retrievals (GET of a stored response
 * or completion, which repeat its usage), updates (POST
 * /v1/chat/completions/{id}), token counting and batch management are not
 * metered (batches are refused unless enabled: src/check/routes/route-table.ts). Matching the end of the
 * path keeps operator route overrides and Gemini's OpenAI-compatible prefix
 * (/v1beta/openai/chat/completions) working.
 */
export function isMeteredRequest(family: RouteFamily, method: string, pathAsSent: string): boolean {
  if (method.toUpperCase() !== 'POST') return false;
  // The form Check classified the request by: `/v1/messages/` is the messages route to Check, and so to metering.
  const path = routingPath(pathAsSent);
  switch (family) {
    case 'chat-completions':
      return /\/(chat\/completions|completions|embeddings|responses|responses\/compact)$/.test(path);
    case 'messages':
      return path.endsWith('/messages');
    case 'generative-content':
      return /:(generateContent|streamGenerateContent|embedContent|batchEmbedContents)$/.test(path);
    default:
      return false;
  }
}

/**
 * Metered requests whose answer carries no usage by design: Gemini's
 * embedContent and batchEmbedContents answer with the embeddings alone, yet
 * their input is billed. Their successful answers are charged the estimate.
 */
export function answersWithoutUsage(family: RouteFamily, path: string): boolean {
  return family === 'generative-content' && /:(embedContent|batchEmbedContents)$/.test(routingPath(path));
}

export function createUsageExtractor(response: ResponseDescription): UsageExtractor {
  if (!isMeteredRequest(response.family, response.method, response.path)) return fixedReading('not-metered-request');
  if (response.status >= 400) return fixedReading('error-status');
  if (response.status < 200 || response.status >= 300) return fixedReading('not-success-status');
  const encoding = response.contentEncoding?.trim().toLowerCase();
  if (encoding && encoding !== 'identity') return fixedReading('unsupported-content-encoding');
  const framing = framingOf(response.contentType);
  if (framing === undefined) return fixedReading('unsupported-content-type');
  const interpreter =
    response.family === 'messages'
      ? new MessagesInterpreter()
      : response.family === 'generative-content'
        ? new GenerativeInterpreter()
        : new ChatCompletionsInterpreter(/\/embeddings$/.test(routingPath(response.path)));
  return new BodyExtractor(interpreter, framing);
}

type Framing = 'json' | 'sse' | 'sniff';

function framingOf(contentType: string | undefined): Framing | undefined {
  const mediaType = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  if (!mediaType) return 'sniff';
  if (mediaType === 'text/event-stream') return 'sse';
  if (mediaType === 'application/json' || mediaType.endsWith('+json')) return 'json';
  return undefined;
}

function fixedReading(reason: NoUsageReason): UsageExtractor {
  const reading: UsageReading = { kind: 'none', reason, streamComplete: false, deliveredTextBytes: 0 };
  return { readsBody: false, write: () => undefined, finish: () => reading };
}

/** What one style reads from the documents of a body: a JSON body, each element of a JSON array, or each SSE event. */
interface Interpreter {
  readonly tree: WatchTree;
  /** `streamed`: the document is one of many (SSE event, array element), not a whole response. */
  document(document: ScannedDocument, eventName: string, streamed: boolean): void;
  done(): void;
  readonly tokens: TokenCounts | undefined;
  /** Why the usage seen cannot be believed (then tokens is undefined). */
  readonly malformed: MalformedUsageReason | undefined;
  readonly sawUsage: boolean;
  readonly final: boolean;
  /** The style's own end-of-stream signal was seen ([DONE], message_stop, a terminal event, a finish reason). */
  readonly ended: boolean;
  readonly model: string | undefined;
  /** Generated text delivered, as a floor for a count that is not final (0 where the count already covers it). */
  readonly deliveredTextBytes: number;
  /** All the generated text delivered: what an estimate counts when the usage is missing or malformed. */
  readonly allTextBytes: number;
  /** Output the upstream generates after this answer (a background response): see UsageReading. */
  readonly pendingOutputTokens?: number | undefined;
}

class BodyExtractor implements UsageExtractor {
  readonly readsBody = true;
  private readonly interpreter: Interpreter;
  private framing: Framing;
  private json: JsonScanner | undefined;
  private sse: SseJsonReader | undefined;
  private bodyBytes = 0;
  private documents = 0;
  private leadingWhitespace: number[] = [];

  constructor(interpreter: Interpreter, framing: Framing) {
    this.interpreter = interpreter;
    this.framing = framing;
  }

  write(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.bodyBytes += chunk.length;
    if (this.framing === 'sniff') {
      const decided = sniff(chunk);
      if (decided === undefined) {
        this.keepLeadingWhitespace(chunk);
        return;
      }
      this.framing = decided;
      if (this.leadingWhitespace.length > 0) this.feed(Uint8Array.from(this.leadingWhitespace));
      this.leadingWhitespace = [];
    }
    this.feed(chunk);
  }

  private feed(chunk: Uint8Array): void {
    if (this.framing === 'json') this.jsonScanner().write(chunk);
    else if (this.framing === 'sse') this.sseReader().write(chunk);
  }

  /** Whitespace before the first significant byte, kept to replay once the framing is known (at most a few bytes in practice). */
  private keepLeadingWhitespace(chunk: Uint8Array): void {
    if (this.leadingWhitespace.length + chunk.length > MAX_LEADING_WHITESPACE) {
      // Only whitespace so far, and a lot of it: that cannot be JSON worth reading; read on as events.
      this.framing = 'sse';
      this.feed(Uint8Array.from(this.leadingWhitespace));
      this.leadingWhitespace = [];
      this.feed(chunk);
      return;
    }
    this.leadingWhitespace.push(...chunk);
  }

  finish(): UsageReading {
    let complete = false;
    if (this.json) {
      complete = this.json.end();
      this.json = undefined;
    } else if (this.sse) {
      this.sse.end();
      this.sse = undefined;
    }
    const interpreter = this.interpreter;
    // A JSON body is complete at its last byte (a Gemini JSON-array stream at its closing bracket); a stream at its own end signal.
    const streamComplete = this.framing === 'json' ? complete : interpreter.ended;
    const model = interpreter.model;
    if (interpreter.tokens) {
      const delivered =
        !interpreter.final && interpreter.deliveredTextBytes > 0 ? { deliveredTextBytes: interpreter.deliveredTextBytes } : {};
      return {
        kind: 'reported',
        tokens: interpreter.tokens,
        ...(model ? { model } : {}),
        final: interpreter.final,
        streamComplete,
        ...delivered,
      };
    }
    const reason: NoUsageReason =
      this.bodyBytes === 0
        ? 'empty-body'
        : interpreter.sawUsage
          ? 'malformed-usage'
          : this.documents === 0
            ? 'malformed-body'
            : 'no-usage-reported';
    const malformed = reason === 'malformed-usage' ? { malformed: interpreter.malformed ?? 'invalid-count' } : {};
    const pending = interpreter.pendingOutputTokens;
    return {
      kind: 'none',
      reason,
      ...malformed,
      ...(model ? { model } : {}),
      streamComplete,
      deliveredTextBytes: interpreter.allTextBytes,
      ...(pending !== undefined ? { pendingOutputTokens: pending } : {}),
    };
  }

  private jsonScanner(): JsonScanner {
    this.json ??= new JsonScanner(this.interpreter.tree, {
      arrayOfDocuments: true,
      onDocument: (document) => {
        this.documents++;
        // A root array's elements are chunks of a stream (Gemini without alt=sse); a root object is the whole response.
        this.interpreter.document(document, '', this.json?.isArrayOfDocuments ?? false);
      },
    });
    return this.json;
  }

  private sseReader(): SseJsonReader {
    this.sse ??= new SseJsonReader(this.interpreter.tree, {
      onJsonEvent: (eventName, document) => {
        this.documents++;
        this.interpreter.document(document, eventName, true);
      },
      onDone: () => {
        this.documents++;
        this.interpreter.done();
      },
    });
    return this.sse;
  }
}

const MAX_LEADING_WHITESPACE = 4096;

/** A body with no content-type: JSON if its first significant byte opens an object or array, else server-sent events. */
function sniff(chunk: Uint8Array): Framing | undefined {
  for (const byte of chunk) {
    if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) continue;
    return byte === 0x7b || byte === 0x5b ? 'json' : 'sse';
  }
  return undefined;
}

function counted(reading: ShapeReading): TokenCounts | undefined {
  return isMalformed(reading) ? undefined : reading;
}

function malformedOf(reading: ShapeReading): MalformedUsageReason | undefined {
  return isMalformed(reading) ? reading : undefined;
}

/** A model name as a response gives it, if it is a plausible one (short, printable). */
function modelName(value: unknown): string | undefined {
  return typeof value === 'string' && isPlausibleModelName(value) ? value : undefined;
}

// ---------------------------------------------------------------------------
// chat-completions: Chat Completions, Completions, Embeddings, the Responses API

/** Responses API events whose `delta` is generated text the client receives. */
const RESPONSES_TEXT_DELTAS = new Set([
  'response.output_text.delta',
  'response.refusal.delta',
  'response.function_call_arguments.delta',
  'response.custom_tool_call_input.delta',
  'response.mcp_call_arguments.delta',
  'response.code_interpreter_call_code.delta',
  'response.reasoning_text.delta',
  'response.reasoning_summary_text.delta',
  'response.audio.transcript.delta',
]);
/** The events that end a Responses API stream, each with the whole response (and its usage, when any). */
const RESPONSES_TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

const CHAT_TEXT_PATHS: readonly (readonly string[])[] = [
  ['choices', '*', 'delta', 'content'],
  ['choices', '*', 'delta', 'refusal'],
  ['choices', '*', 'delta', 'reasoning_content'],
  ['choices', '*', 'delta', 'tool_calls', '*', 'function', 'name'],
  ['choices', '*', 'delta', 'tool_calls', '*', 'function', 'arguments'],
  ['choices', '*', 'delta', 'function_call', 'name'],
  ['choices', '*', 'delta', 'function_call', 'arguments'],
  ['choices', '*', 'text'],
  ['choices', '*', 'message', 'content'],
  ['choices', '*', 'message', 'refusal'],
  ['choices', '*', 'message', 'tool_calls', '*', 'function', 'name'],
  ['choices', '*', 'message', 'tool_calls', '*', 'function', 'arguments'],
  // A whole Responses API answer: its output items' text and function-call arguments.
  ['output', '*', 'content', '*', 'text'],
  ['output', '*', 'arguments'],
];

const CHAT = {
  usage: 0,
  model: 1,
  type: 2,
  responseUsage: 3,
  responseModel: 4,
  delta: 5,
  choice: 6,
  finishReason: 7,
  firstText: 8,
} as const;

/** A Responses API response's `background` and `max_output_tokens`: whole, or in a stream event's `response`. */
const CHAT_BACKGROUND = {
  background: CHAT.firstText + CHAT_TEXT_PATHS.length,
  maxOutput: CHAT.firstText + CHAT_TEXT_PATHS.length + 1,
  eventBackground: CHAT.firstText + CHAT_TEXT_PATHS.length + 2,
  eventMaxOutput: CHAT.firstText + CHAT_TEXT_PATHS.length + 3,
} as const;

const CHAT_TREE = new WatchTree([
  { path: ['usage'], kind: 'capture' },
  { path: ['model'], kind: 'capture' },
  { path: ['type'], kind: 'capture' },
  { path: ['response', 'usage'], kind: 'capture' },
  { path: ['response', 'model'], kind: 'capture' },
  { path: ['delta'], kind: 'measure' },
  { path: ['choices', '*'], kind: 'presence' },
  { path: ['choices', '*', 'finish_reason'], kind: 'capture' },
  ...CHAT_TEXT_PATHS.map((path): WatchSpec => ({ path, kind: 'measure' })),
  { path: ['background'], kind: 'capture' },
  { path: ['max_output_tokens'], kind: 'capture' },
  { path: ['response', 'background'], kind: 'capture' },
  { path: ['response', 'max_output_tokens'], kind: 'capture' },
]);

class ChatCompletionsInterpreter implements Interpreter {
  readonly tree = CHAT_TREE;
  /** An embeddings answer: its usage has no output count. */
  constructor(private readonly embeddings: boolean) {}

  tokens: TokenCounts | undefined;
  malformed: MalformedUsageReason | undefined;
  sawUsage = false;
  final = false;
  ended = false;
  model: string | undefined;
  deliveredTextBytes = 0;
  pendingOutputTokens: number | undefined;

  get allTextBytes(): number {
    return this.deliveredTextBytes;
  }

  document(document: ScannedDocument, _eventName: string, streamed: boolean): void {
    this.notePending(document.value(CHAT_BACKGROUND.background), document.value(CHAT_BACKGROUND.maxOutput));
    this.notePending(document.value(CHAT_BACKGROUND.eventBackground), document.value(CHAT_BACKGROUND.eventMaxOutput));
    const type = document.value(CHAT.type);
    if (typeof type === 'string' && type.startsWith('response.')) {
      this.responsesEvent(document, type);
      return;
    }
    // One model names the whole response: parsed from the first chunk that names it, not from every chunk.
    this.model ??= modelName(document.value(CHAT.model));
    for (let index = CHAT.firstText; index < CHAT.firstText + CHAT_TEXT_PATHS.length; index++)
      this.deliveredTextBytes += document.measured(index);
    const usage = document.value(CHAT.usage);
    if (usage === undefined || usage === null) return;
    // The last usage counts, never a sum: OpenAI sends one usage chunk, Gemini's compatible endpoint sends several running ones.
    this.report(isResponsesShape(usage) ? responsesTokens(usage) : chatCompletionsTokens(usage, this.embeddings));
    // OpenAI's usage chunk has no choices; a chunk that also finishes a choice is the last one too.
    const finishReason = document.value(CHAT.finishReason);
    this.final = !streamed || document.count(CHAT.choice) === 0 || (typeof finishReason === 'string' && finishReason.length > 0);
  }

  done(): void {
    this.ended = true;
    if (this.tokens) this.final = true;
  }

  private responsesEvent(document: ScannedDocument, type: string): void {
    this.model ??= modelName(document.value(CHAT.responseModel));
    if (RESPONSES_TEXT_DELTAS.has(type)) this.deliveredTextBytes += document.measured(CHAT.delta);
    if (!RESPONSES_TERMINAL_EVENTS.has(type)) return;
    this.ended = true;
    const usage = document.value(CHAT.responseUsage);
    if (usage === undefined || usage === null) return;
    this.report(responsesTokens(usage));
    this.final = true;
  }

  private report(reading: ShapeReading): void {
    this.sawUsage = true;
    this.tokens = isMalformed(reading) ? undefined : reading;
    this.malformed = isMalformed(reading) ? reading : undefined;
  }

  /**
   * A background response goes on after its answer, and its usage is only in a later retrieval (GET
   * /v1/responses/{id}), which is not metered: what it will generate is counted now, at its own output limit.
   */
  private notePending(background: unknown, maxOutputTokens: unknown): void {
    if (background !== true) return;
    const limit = isTokenCount(maxOutputTokens) ? maxOutputTokens : DEFAULT_HOLD_OUTPUT_TOKENS;
    this.pendingOutputTokens = Math.max(this.pendingOutputTokens ?? 0, limit);
  }
}

// ---------------------------------------------------------------------------
// messages: Anthropic Messages

const MESSAGES = { type: 0, usage: 1, model: 2, messageUsage: 3, messageModel: 4, stopReason: 5, firstText: 6 } as const;

/** content_block_delta's generated text: text, thinking and tool-input deltas; a whole message's text and thinking blocks. */
const MESSAGES_TEXT_PATHS: readonly (readonly string[])[] = [
  ['delta', 'text'],
  ['delta', 'thinking'],
  ['delta', 'partial_json'],
  ['content', '*', 'text'],
  ['content', '*', 'thinking'],
];

const MESSAGES_TREE = new WatchTree([
  { path: ['type'], kind: 'capture' },
  { path: ['usage'], kind: 'capture' },
  { path: ['model'], kind: 'capture' },
  { path: ['message', 'usage'], kind: 'capture' },
  { path: ['message', 'model'], kind: 'capture' },
  { path: ['delta', 'stop_reason'], kind: 'capture' },
  ...MESSAGES_TEXT_PATHS.map((path): WatchSpec => ({ path, kind: 'measure' })),
]);

class MessagesInterpreter implements Interpreter {
  readonly tree = MESSAGES_TREE;
  private readonly snapshot = emptyMessagesSnapshot();
  sawUsage = false;
  final = false;
  ended = false;
  model: string | undefined;
  private textBytes = 0;
  private sawDelta = false;

  get tokens(): TokenCounts | undefined {
    return this.sawUsage ? counted(messagesTokens(this.snapshot)) : undefined;
  }

  get malformed(): MalformedUsageReason | undefined {
    return this.sawUsage ? malformedOf(messagesTokens(this.snapshot)) : undefined;
  }

  /** Until a message_delta the output count is message_start's early one (1): only then is the text a better floor. */
  get deliveredTextBytes(): number {
    return this.sawDelta ? 0 : this.textBytes;
  }

  get allTextBytes(): number {
    return this.textBytes;
  }

  document(document: ScannedDocument, eventName: string): void {
    const declared = document.value(MESSAGES.type);
    const type = typeof declared === 'string' ? declared : eventName;
    switch (type) {
      case 'message': // the whole message (not streamed)
        this.model = modelName(document.value(MESSAGES.model)) ?? this.model;
        this.measureText(document);
        this.overlay(document.value(MESSAGES.usage));
        this.final = true;
        this.ended = true;
        return;
      case 'message_start':
        this.model = modelName(document.value(MESSAGES.messageModel)) ?? this.model;
        this.overlay(document.value(MESSAGES.messageUsage));
        return;
      case 'message_delta': {
        this.sawDelta = true;
        this.overlay(document.value(MESSAGES.usage));
        const stopReason = document.value(MESSAGES.stopReason);
        if (typeof stopReason === 'string' && stopReason.length > 0) this.final = true;
        return;
      }
      case 'message_stop':
        this.ended = true;
        if (this.sawUsage) this.final = true;
        return;
      case 'content_block_delta':
        this.measureText(document);
        return;
      default: // ping, content blocks, error, and event types added later
        return;
    }
  }

  done(): void {
    // Anthropic streams have no [DONE]; message_stop ends them.
  }

  private measureText(document: ScannedDocument): void {
    for (let index = MESSAGES.firstText; index < MESSAGES.firstText + MESSAGES_TEXT_PATHS.length; index++)
      this.textBytes += document.measured(index);
  }

  private overlay(usage: unknown): void {
    if (usage === undefined || usage === null) return;
    this.sawUsage = true;
    overlayMessagesUsage(this.snapshot, usage);
  }
}

// ---------------------------------------------------------------------------
// generative-content: Gemini generateContent / streamGenerateContent

const GENERATIVE = { usage: 0, modelVersion: 1, finishReason: 2, text: 3, searchQueries: 4 } as const;

const GENERATIVE_TREE = new WatchTree([
  { path: ['usageMetadata'], kind: 'capture' },
  { path: ['modelVersion'], kind: 'capture' },
  { path: ['candidates', '*', 'finishReason'], kind: 'capture' },
  { path: ['candidates', '*', 'content', 'parts', '*', 'text'], kind: 'measure' },
  { path: ['candidates', '*', 'groundingMetadata', 'webSearchQueries', '*'], kind: 'presence' },
]);

class GenerativeInterpreter implements Interpreter {
  readonly tree = GENERATIVE_TREE;
  private readonly snapshot = emptyGenerativeSnapshot();
  sawUsage = false;
  final = false;
  ended = false;
  model: string | undefined;
  private textBytes = 0;

  get tokens(): TokenCounts | undefined {
    return this.sawUsage ? counted(this.reading()) : undefined;
  }

  get malformed(): MalformedUsageReason | undefined {
    return this.sawUsage ? malformedOf(this.reading()) : undefined;
  }

  /**
   * The text delivered, the floor of a count that is not final: a running candidates count can be far behind the text
   * (some models report usage on the first and the last chunk only), and a client that leaves before the last must
   * not get the text in between for the count of the first.
   */
  get deliveredTextBytes(): number {
    return this.textBytes;
  }

  /** A final answer that delivered text yet reports no candidates count (proto3 drops a 0) contradicts itself. */
  private reading(): ShapeReading {
    if (this.final && this.snapshot.candidatesTokens < 0 && this.textBytes > 0) return 'invalid-count';
    return generativeTokens(this.snapshot);
  }

  get allTextBytes(): number {
    return this.textBytes;
  }

  document(document: ScannedDocument, _eventName: string, streamed: boolean): void {
    this.model ??= modelName(document.value(GENERATIVE.modelVersion))?.replace(/^models\//, '');
    this.textBytes += document.measured(GENERATIVE.text);
    this.snapshot.webSearchQueries = Math.max(this.snapshot.webSearchQueries, document.count(GENERATIVE.searchQueries));
    const finishReason = document.value(GENERATIVE.finishReason);
    const finished = !streamed || (typeof finishReason === 'string' && finishReason.length > 0);
    if (finished) this.ended = true;
    const usage = document.value(GENERATIVE.usage);
    if (usage === undefined || usage === null) return;
    this.sawUsage = true;
    overlayGenerativeUsage(this.snapshot, usage);
    // Running totals until the chunk that finishes the candidate.
    this.final = finished;
  }

  done(): void {
    // Gemini streams have no [DONE]; the chunk with a finishReason is the last.
  }
}
