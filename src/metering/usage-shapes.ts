import { isTokenCount, MAX_TOKEN_COUNT, type TokenCounts } from '../domain/usage';

/**
 * Each API's usage object turned into the four counts of TokenCounts, which
 * never overlap. Field names are the official SDKs' (openai-node
 * CompletionUsage and ResponseUsage, @anthropic-ai/sdk Usage and
 * MessageDeltaUsage, @google/genai UsageMetadata). A required count that is
 * missing, or any count that is not a whole number from 0 to MAX_TOKEN_COUNT,
 * makes the whole usage malformed (undefined): guessing a part would bill a
 * number nobody reported.
 */

type Fields = Record<string, unknown>;

const MISSING = -1;
const INVALID = -2;

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A count, MISSING when absent or null, INVALID when present but not a token count. */
function countOf(fields: Fields | undefined, key: string): number {
  const value = fields?.[key];
  if (value === undefined || value === null) return MISSING;
  return isTokenCount(value) ? value : INVALID;
}

/** Optional details object: absent or null is fine; anything else but an object is malformed. */
function detailsOf(fields: Fields, key: string): Fields | undefined | typeof INVALID {
  const value = fields[key];
  if (value === undefined || value === null) return undefined;
  return isObject(value) ? value : INVALID;
}

function required(count: number): number | undefined {
  return count >= 0 ? count : undefined;
}

function optional(count: number): number | undefined {
  if (count === INVALID) return undefined;
  return count === MISSING ? 0 : count;
}

/**
 * OpenAI puts cached reads and cache writes inside the prompt count
 * (`prompt_tokens` 2,600 with `cached_tokens` 2,000 and `cache_write_tokens`
 * 400 leaves 200 uncached). A report whose parts exceed the whole is billed
 * as reported for the parts and 0 for the rest, never a negative count.
 */
function splitPrompt(prompt: number, cached: number, written: number, output: number): TokenCounts {
  return {
    inputTokens: Math.max(0, prompt - cached - written),
    outputTokens: output,
    cachedInputTokens: cached,
    cacheCreationTokens: written,
  };
}

/** Chat Completions, legacy Completions and Embeddings (`completion_tokens` absent: 0), and Gemini's OpenAI-compatible endpoint. */
export function chatCompletionsTokens(usage: unknown): TokenCounts | undefined {
  if (!isObject(usage)) return undefined;
  const details = detailsOf(usage, 'prompt_tokens_details');
  if (details === INVALID) return undefined;
  const prompt = required(countOf(usage, 'prompt_tokens'));
  const output = optional(countOf(usage, 'completion_tokens'));
  const cached = optional(countOf(details, 'cached_tokens'));
  const written = optional(countOf(details, 'cache_write_tokens'));
  if (prompt === undefined || output === undefined || cached === undefined || written === undefined) return undefined;
  return splitPrompt(prompt, cached, written, output);
}

/** The Responses API's `usage`: input_tokens includes input_tokens_details.cached_tokens and cache_write_tokens. */
export function responsesTokens(usage: unknown): TokenCounts | undefined {
  if (!isObject(usage)) return undefined;
  const details = detailsOf(usage, 'input_tokens_details');
  if (details === INVALID) return undefined;
  const input = required(countOf(usage, 'input_tokens'));
  const output = required(countOf(usage, 'output_tokens'));
  const cached = optional(countOf(details, 'cached_tokens'));
  const written = optional(countOf(details, 'cache_write_tokens'));
  if (input === undefined || output === undefined || cached === undefined || written === undefined) return undefined;
  return splitPrompt(input, cached, written, output);
}

/** Whether a `usage` object is in the Responses API's shape rather than Chat Completions'. */
export function isResponsesShape(usage: unknown): boolean {
  return isObject(usage) && 'input_tokens' in usage && !('prompt_tokens' in usage);
}

/**
 * Anthropic's usage as the stream builds it: `message_start.message.usage`,
 * then each `message_delta.usage` overwrites `output_tokens` (always present)
 * and the input and cache counts when they are non-null. Every count there is
 * cumulative, so nothing is ever added (the SDK's MessageStream does the same).
 */
export interface MessagesUsageSnapshot {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  /** `cache_creation.ephemeral_1h_input_tokens`: the part of the cache writes that lives an hour. */
  cacheCreation1hTokens: number;
  malformed: boolean;
}

export function emptyMessagesSnapshot(): MessagesUsageSnapshot {
  return {
    inputTokens: MISSING,
    outputTokens: MISSING,
    cacheReadTokens: MISSING,
    cacheCreationTokens: MISSING,
    cacheCreation1hTokens: MISSING,
    malformed: false,
  };
}

/** Overlays one usage object (a whole message's, message_start's or a message_delta's) onto the snapshot. */
export function overlayMessagesUsage(snapshot: MessagesUsageSnapshot, usage: unknown): void {
  if (!isObject(usage)) {
    snapshot.malformed = true;
    return;
  }
  const fields: [keyof MessagesUsageSnapshot, string][] = [
    ['inputTokens', 'input_tokens'],
    ['outputTokens', 'output_tokens'],
    ['cacheReadTokens', 'cache_read_input_tokens'],
    ['cacheCreationTokens', 'cache_creation_input_tokens'],
  ];
  for (const [target, key] of fields) {
    const count = countOf(usage, key);
    if (count === INVALID) snapshot.malformed = true;
    else if (count !== MISSING) (snapshot[target] as number) = count;
  }
  // Only a price split of the cache writes: one that cannot be read leaves them all at the 5-minute price, as before
  // the split was read, rather than voiding the usage (a messages answer without usage costs nothing).
  const cacheCreation = detailsOf(usage, 'cache_creation');
  if (cacheCreation !== undefined && cacheCreation !== INVALID) {
    const oneHour = countOf(cacheCreation, 'ephemeral_1h_input_tokens');
    if (oneHour >= 0) snapshot.cacheCreation1hTokens = oneHour;
  }
}

/**
 * Anthropic's counts do not overlap: `input_tokens` excludes both cache
 * counts. The 1-hour writes are a part of `cache_creation_input_tokens`; a
 * report whose part exceeds the whole says at least that many were 1-hour
 * writes, so all of them are.
 */
export function messagesTokens(snapshot: MessagesUsageSnapshot): TokenCounts | undefined {
  if (snapshot.malformed || snapshot.inputTokens < 0 || snapshot.outputTokens < 0) return undefined;
  const cacheCreationTokens = Math.max(0, snapshot.cacheCreationTokens);
  const oneHour = Math.min(cacheCreationTokens, Math.max(0, snapshot.cacheCreation1hTokens));
  return {
    inputTokens: snapshot.inputTokens,
    outputTokens: snapshot.outputTokens,
    cachedInputTokens: Math.max(0, snapshot.cacheReadTokens),
    cacheCreationTokens,
    ...(oneHour > 0 ? { cacheCreation1hTokens: oneHour } : {}),
  };
}

/**
 * Gemini's `usageMetadata`, kept as the latest value of each field: streamed
 * chunks carry running totals (the last chunk the final ones), and a field
 * may appear only on some chunks, so each is overwritten, never summed.
 */
export interface GenerativeUsageSnapshot {
  promptTokens: number;
  candidatesTokens: number;
  cachedContentTokens: number;
  thoughtsTokens: number;
  toolUsePromptTokens: number;
  malformed: boolean;
}

export function emptyGenerativeSnapshot(): GenerativeUsageSnapshot {
  return {
    promptTokens: MISSING,
    candidatesTokens: MISSING,
    cachedContentTokens: MISSING,
    thoughtsTokens: MISSING,
    toolUsePromptTokens: MISSING,
    malformed: false,
  };
}

export function overlayGenerativeUsage(snapshot: GenerativeUsageSnapshot, usage: unknown): void {
  if (!isObject(usage)) {
    snapshot.malformed = true;
    return;
  }
  const fields: [keyof GenerativeUsageSnapshot, string][] = [
    ['promptTokens', 'promptTokenCount'],
    ['candidatesTokens', 'candidatesTokenCount'],
    ['cachedContentTokens', 'cachedContentTokenCount'],
    ['thoughtsTokens', 'thoughtsTokenCount'],
    ['toolUsePromptTokens', 'toolUsePromptTokenCount'],
  ];
  for (const [target, key] of fields) {
    const count = countOf(usage, key);
    if (count === INVALID) snapshot.malformed = true;
    else if (count !== MISSING) (snapshot[target] as number) = count;
  }
}

/**
 * `promptTokenCount` includes the cached content; tool-use prompt tokens
 * (e.g. search results fed back to the model) are input too, counted apart
 * from the prompt (totalTokenCount = prompt + candidates + toolUsePrompt +
 * thoughts). Thinking tokens are output: Google bills them at the output
 * price, and OpenAI and Anthropic count reasoning inside their output counts,
 * so output means the same in every style. Gemini reports no cache writes.
 */
export function generativeTokens(snapshot: GenerativeUsageSnapshot): TokenCounts | undefined {
  if (snapshot.malformed || snapshot.promptTokens < 0) return undefined;
  const cached = Math.max(0, snapshot.cachedContentTokens);
  const input = Math.max(0, snapshot.promptTokens - cached) + Math.max(0, snapshot.toolUsePromptTokens);
  const output = Math.max(0, snapshot.candidatesTokens) + Math.max(0, snapshot.thoughtsTokens);
  // Each field is bounded, not their sums: a sum past the bound is no count a record can carry (costOf and the
  // recorder refuse it, and the answer would be lost with a throw), so it is malformed like any count past it.
  if (input > MAX_TOKEN_COUNT || output > MAX_TOKEN_COUNT) return undefined;
  return { inputTokens: input, outputTokens: output, cachedInputTokens: cached, cacheCreationTokens: 0 };
}
