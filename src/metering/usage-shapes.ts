import { isTokenCount, MAX_CALL_COUNT, MAX_TOKEN_COUNT, type MalformedUsageReason, type TokenCounts } from './usage';

/**
 * Each API's usage object turned into the four counts of TokenCounts, which
 * never overlap. Field names are the official SDKs' (openai-node
 * CompletionUsage and ResponseUsage, @anthropic-ai/sdk Usage and
 * MessageDeltaUsage, @google/genai UsageMetadata). A required count that is
 * missing, any count that is not a whole number from 0 to MAX_TOKEN_COUNT,
 * or counts that break a relation their API defines make the whole usage
 * malformed (a MalformedUsageReason): guessing a part would bill a number
 * nobody reported.
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

/** The counts a usage object gives, or why it cannot be believed. */
export type ShapeReading = TokenCounts | MalformedUsageReason;

export function isMalformed(reading: ShapeReading): reading is MalformedUsageReason {
  return typeof reading === 'string';
}

/**
 * OpenAI puts cached reads and cache writes inside the prompt count
 * (`prompt_tokens` 2,600 with `cached_tokens` 2,000 and `cache_write_tokens`
 * 400 leaves 200 uncached), reasoning tokens inside the output count, and
 * `total_tokens` is their sum (Embeddings: the prompt alone; Gemini's
 * compatible endpoint: see below). A report that
 * breaks any of these is malformed: billing its parts would charge a number
 * the whole denies (cached_tokens 1,000,000 of a 10-token prompt).
 */
function splitPrompt(
  prompt: number,
  cached: number,
  written: number,
  output: number,
  reasoning: number,
  total: number,
  audio: { input: number; output: number },
): ShapeReading {
  if (cached + written > prompt) return 'cache-exceeds-prompt';
  // Gemini's OpenAI-compatible endpoint reports reasoning apart from completion_tokens, and its total_tokens counts
  // them (prompt + completion + reasoning): that is consistent too, and the reasoning is output it bills.
  const reasoningApart = reasoning > 0 && total === prompt + output + reasoning;
  if (!reasoningApart) {
    if (reasoning > output) return 'reasoning-exceeds-output';
    if (total !== MISSING && total !== prompt + output) return 'total-mismatch';
  }
  if (audio.input > prompt || audio.output > output) return 'modality-exceeds-total';
  const generated = reasoningApart ? output + reasoning : output;
  if (generated > MAX_TOKEN_COUNT) return 'invalid-count';
  const uncached = prompt - cached - written;
  return withParts(
    { inputTokens: uncached, outputTokens: generated, cachedInputTokens: cached, cacheCreationTokens: written },
    {
      reasoningTokens: reasoning,
      // The usage does not say whether cached tokens were audio: audio is priced as such up to the uncached input,
      // any more of it as the cache reads it then was.
      inputAudioTokens: Math.min(audio.input, uncached),
      outputAudioTokens: Math.min(audio.output, generated - reasoning),
    },
  );
}

type PartCounts = Partial<
  Pick<
    TokenCounts,
    | 'cacheCreation1hTokens'
    | 'reasoningTokens'
    | 'inputAudioTokens'
    | 'inputImageTokens'
    | 'outputAudioTokens'
    | 'outputImageTokens'
    | 'webSearchCalls'
  >
>;

/** The four counts with the parts that are not 0 (a part absent reads as 0, so records stay small and shapes few). */
function withParts(counts: TokenCounts, parts: PartCounts): TokenCounts {
  const present = Object.entries(parts).filter(([, count]) => count !== undefined && count > 0);
  if (present.length === 0) return counts;
  const { inputTokens, outputTokens, cachedInputTokens, cacheCreationTokens } = counts;
  return { inputTokens, outputTokens, cachedInputTokens, cacheCreationTokens, ...Object.fromEntries(present) };
}

/** The counts shared by both OpenAI shapes, read under each shape's names. */
function openAiTokens(
  usage: unknown,
  names: { prompt: string; output: string; outputRequired: boolean; inputDetails: string; outputDetails: string },
): ShapeReading {
  if (!isObject(usage)) return 'invalid-count';
  const details = detailsOf(usage, names.inputDetails);
  const outputDetails = detailsOf(usage, names.outputDetails);
  if (details === INVALID || outputDetails === INVALID) return 'invalid-count';
  const prompt = required(countOf(usage, names.prompt));
  const outputCount = countOf(usage, names.output);
  const output = names.outputRequired ? required(outputCount) : optional(outputCount);
  const cached = optional(countOf(details, 'cached_tokens'));
  const written = optional(countOf(details, 'cache_write_tokens'));
  const reasoning = optional(countOf(outputDetails, 'reasoning_tokens'));
  const inputAudio = optional(countOf(details, 'audio_tokens'));
  const outputAudio = optional(countOf(outputDetails, 'audio_tokens'));
  const total = countOf(usage, 'total_tokens');
  if (
    prompt === undefined ||
    output === undefined ||
    cached === undefined ||
    written === undefined ||
    reasoning === undefined ||
    inputAudio === undefined ||
    outputAudio === undefined
  ) {
    return 'invalid-count';
  }
  if (total === INVALID) return 'invalid-count';
  return splitPrompt(prompt, cached, written, output, reasoning, total, { input: inputAudio, output: outputAudio });
}

/**
 * Chat Completions, legacy Completions and Embeddings, and Gemini's OpenAI-compatible endpoint. Only an embeddings
 * answer has no `completion_tokens` (then 0); on any other, a usage without it is malformed, not output for nothing.
 */
export function chatCompletionsTokens(usage: unknown, embeddings = false): ShapeReading {
  return openAiTokens(usage, {
    prompt: 'prompt_tokens',
    output: 'completion_tokens',
    outputRequired: !embeddings,
    inputDetails: 'prompt_tokens_details',
    outputDetails: 'completion_tokens_details',
  });
}

/** The Responses API's `usage`: input_tokens includes input_tokens_details.cached_tokens and cache_write_tokens. */
export function responsesTokens(usage: unknown): ShapeReading {
  return openAiTokens(usage, {
    prompt: 'input_tokens',
    output: 'output_tokens',
    outputRequired: true,
    inputDetails: 'input_tokens_details',
    outputDetails: 'output_tokens_details',
  });
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
  /** `output_tokens_details.thinking_tokens`: the part of the output that is thinking. */
  thinkingTokens: number;
  /** `server_tool_use.web_search_requests`. */
  webSearchRequests: number;
  /** The first relation a usage object broke. */
  malformed: MalformedUsageReason | undefined;
}

export function emptyMessagesSnapshot(): MessagesUsageSnapshot {
  return {
    inputTokens: MISSING,
    outputTokens: MISSING,
    cacheReadTokens: MISSING,
    cacheCreationTokens: MISSING,
    cacheCreation1hTokens: MISSING,
    thinkingTokens: MISSING,
    webSearchRequests: MISSING,
    malformed: undefined,
  };
}

/** A count of calls, MISSING when absent or null, INVALID when present but not a whole number from 0 to MAX_CALL_COUNT. */
function callCountOf(fields: Fields | undefined, key: string): number {
  const value = fields?.[key];
  if (value === undefined || value === null) return MISSING;
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= MAX_CALL_COUNT ? value : INVALID;
}

/**
 * Overlays one usage object (a whole message's, message_start's or a
 * message_delta's) onto the snapshot, after checking the relations Anthropic
 * defines within one object. `input_tokens` excludes cache reads and writes
 * ("input tokens which were not read from or used to create a cache"), so no
 * cache count is bounded by it: 3 input tokens beside 100,000 cache reads is
 * an ordinary answer. What does hold: `cache_creation_input_tokens` equals
 * the sum of the `cache_creation` split (5-minute and 1-hour writes), and
 * `output_tokens_details.thinking_tokens` is a part of `output_tokens`.
 */
export function overlayMessagesUsage(snapshot: MessagesUsageSnapshot, usage: unknown): void {
  if (!isObject(usage)) {
    snapshot.malformed ??= 'invalid-count';
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
    if (count === INVALID) snapshot.malformed ??= 'invalid-count';
    else if (count !== MISSING) (snapshot[target] as number) = count;
  }
  const broken = messagesRelation(usage);
  if (broken !== undefined) snapshot.malformed ??= broken;
  const cacheCreation = detailsOf(usage, 'cache_creation');
  if (cacheCreation !== undefined && cacheCreation !== INVALID) {
    const fiveMinutes = countOf(cacheCreation, 'ephemeral_5m_input_tokens');
    const oneHour = countOf(cacheCreation, 'ephemeral_1h_input_tokens');
    if (oneHour >= 0) snapshot.cacheCreation1hTokens = oneHour;
    // The split without its whole is still every write: the whole is their sum, never 0.
    if (countOf(usage, 'cache_creation_input_tokens') === MISSING && (fiveMinutes >= 0 || oneHour >= 0)) {
      snapshot.cacheCreationTokens = Math.max(0, fiveMinutes) + Math.max(0, oneHour);
    }
  }
  const outputDetails = detailsOf(usage, 'output_tokens_details');
  if (outputDetails !== undefined && outputDetails !== INVALID) {
    const thinking = countOf(outputDetails, 'thinking_tokens');
    if (thinking >= 0) snapshot.thinkingTokens = thinking;
  }
  const serverTools = detailsOf(usage, 'server_tool_use');
  if (serverTools === INVALID) snapshot.malformed ??= 'invalid-call-count';
  else if (serverTools !== undefined) {
    const searches = callCountOf(serverTools, 'web_search_requests');
    if (searches === INVALID) snapshot.malformed ??= 'invalid-call-count';
    else if (searches !== MISSING) snapshot.webSearchRequests = searches;
  }
}

/** The relation one Anthropic usage object breaks, if any (absent counts are not compared). */
function messagesRelation(usage: Fields): MalformedUsageReason | undefined {
  const cacheCreation = detailsOf(usage, 'cache_creation');
  const outputDetails = detailsOf(usage, 'output_tokens_details');
  if (cacheCreation === INVALID || outputDetails === INVALID) return 'invalid-count';
  if (cacheCreation !== undefined) {
    const fiveMinutes = countOf(cacheCreation, 'ephemeral_5m_input_tokens');
    const oneHour = countOf(cacheCreation, 'ephemeral_1h_input_tokens');
    if (fiveMinutes === INVALID || oneHour === INVALID) return 'invalid-count';
    const written = countOf(usage, 'cache_creation_input_tokens');
    if (written >= 0 && Math.max(0, fiveMinutes) + Math.max(0, oneHour) !== written) return 'cache-write-split-mismatch';
  }
  const thinking = countOf(outputDetails, 'thinking_tokens');
  if (thinking === INVALID) return 'invalid-count';
  const output = countOf(usage, 'output_tokens');
  if (thinking >= 0 && output >= 0 && thinking > output) return 'reasoning-exceeds-output';
  return undefined;
}

/**
 * Anthropic's counts do not overlap: `input_tokens` excludes both cache
 * counts. The 1-hour writes are a part of `cache_creation_input_tokens`
 * (checked within each usage object; a stream's later object may update the
 * whole without the split, so the part is bounded by the whole here too).
 */
export function messagesTokens(snapshot: MessagesUsageSnapshot): ShapeReading {
  if (snapshot.malformed !== undefined) return snapshot.malformed;
  if (snapshot.inputTokens < 0 || snapshot.outputTokens < 0) return 'invalid-count';
  const cacheCreationTokens = Math.max(0, snapshot.cacheCreationTokens);
  const oneHour = Math.min(cacheCreationTokens, Math.max(0, snapshot.cacheCreation1hTokens));
  return withParts(
    {
      inputTokens: snapshot.inputTokens,
      outputTokens: snapshot.outputTokens,
      cachedInputTokens: Math.max(0, snapshot.cacheReadTokens),
      cacheCreationTokens,
    },
    {
      cacheCreation1hTokens: oneHour,
      // Checked within each usage object; a later object may update the output without the detail.
      reasoningTokens: Math.min(snapshot.outputTokens, Math.max(0, snapshot.thinkingTokens)),
      webSearchCalls: Math.max(0, snapshot.webSearchRequests),
    },
  );
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
  /** From the per-modality lists (promptTokensDetails, cacheTokensDetails, candidatesTokensDetails). */
  promptAudioTokens: number;
  promptImageTokens: number;
  cacheAudioTokens: number;
  cacheImageTokens: number;
  candidatesAudioTokens: number;
  candidatesImageTokens: number;
  /**
   * Grounding with Google Search: the queries the answer lists in
   * `candidates[].groundingMetadata.webSearchQueries` (set by the reader,
   * the largest list seen: a stream repeats, never splits, its metadata).
   */
  webSearchQueries: number;
  /** The first relation the latest usage object broke. */
  malformed: MalformedUsageReason | undefined;
}

export function emptyGenerativeSnapshot(): GenerativeUsageSnapshot {
  return {
    promptTokens: MISSING,
    candidatesTokens: MISSING,
    cachedContentTokens: MISSING,
    thoughtsTokens: MISSING,
    toolUsePromptTokens: MISSING,
    promptAudioTokens: MISSING,
    promptImageTokens: MISSING,
    cacheAudioTokens: MISSING,
    cacheImageTokens: MISSING,
    candidatesAudioTokens: MISSING,
    candidatesImageTokens: MISSING,
    webSearchQueries: 0,
    malformed: undefined,
  };
}

/**
 * A Gemini per-modality list (`[{modality: "AUDIO", tokenCount: 120}, …]`):
 * its AUDIO and IMAGE counts (0 when not listed; a list names each modality
 * once), undefined when absent, INVALID when it is not such a list. Other
 * modalities (TEXT, VIDEO, DOCUMENT) are priced as the count they are in.
 */
function modalityCounts(fields: Fields, key: string): { audio: number; image: number; all: number } | undefined | typeof INVALID {
  const list = fields[key];
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) return INVALID;
  const counts = { audio: 0, image: 0, all: 0 };
  for (const item of list) {
    if (!isObject(item)) return INVALID;
    const count = countOf(item, 'tokenCount');
    if (count === INVALID) return INVALID;
    counts.all += Math.max(0, count);
    if (item.modality === 'AUDIO') counts.audio += Math.max(0, count);
    else if (item.modality === 'IMAGE') counts.image += Math.max(0, count);
  }
  return counts;
}

const GENERATIVE_MODALITY_LISTS = [
  ['promptTokensDetails', 'promptTokenCount', 'promptAudioTokens', 'promptImageTokens'],
  ['cacheTokensDetails', 'cachedContentTokenCount', 'cacheAudioTokens', 'cacheImageTokens'],
  ['candidatesTokensDetails', 'candidatesTokenCount', 'candidatesAudioTokens', 'candidatesImageTokens'],
] as const;

/** Overlays the modality lists one usageMetadata carries; each count is a part of its list's total. */
function overlayModalities(snapshot: GenerativeUsageSnapshot, usage: Fields): MalformedUsageReason | undefined {
  for (const [listKey, totalKey, audioTarget, imageTarget] of GENERATIVE_MODALITY_LISTS) {
    const counts = modalityCounts(usage, listKey);
    if (counts === INVALID) return 'invalid-count';
    if (counts === undefined) continue;
    snapshot[audioTarget] = counts.audio;
    snapshot[imageTarget] = counts.image;
    const total = Math.max(0, countOf(usage, totalKey));
    // The modalities split their total: together they cannot exceed it (TEXT 900 and AUDIO 600 of a 1,000-token prompt).
    if (counts.all > total) return 'modality-exceeds-total';
  }
  return undefined;
}

/**
 * Checked within each usageMetadata (a streamed chunk's running totals agree
 * with each other): `promptTokenCount` includes `cachedContentTokenCount`,
 * and `totalTokenCount` = prompt + candidates + toolUsePrompt + thoughts.
 * Gemini's JSON omits a count that is 0 (proto3), so an absent part is 0.
 */
export function overlayGenerativeUsage(snapshot: GenerativeUsageSnapshot, usage: unknown): void {
  // The latest usageMetadata is judged alone: a running chunk's slip does not outlive the final totals that correct it.
  snapshot.malformed = undefined;
  if (!isObject(usage)) {
    snapshot.malformed ??= 'invalid-count';
    return;
  }
  const fields: [keyof GenerativeUsageSnapshot, string][] = [
    ['promptTokens', 'promptTokenCount'],
    ['candidatesTokens', 'candidatesTokenCount'],
    ['cachedContentTokens', 'cachedContentTokenCount'],
    ['thoughtsTokens', 'thoughtsTokenCount'],
    ['toolUsePromptTokens', 'toolUsePromptTokenCount'],
  ];
  let invalid = false;
  for (const [target, key] of fields) {
    const count = countOf(usage, key);
    if (count === INVALID) invalid = true;
    else if (count !== MISSING) (snapshot[target] as number) = count;
  }
  const total = countOf(usage, 'totalTokenCount');
  if (invalid || total === INVALID) {
    snapshot.malformed ??= 'invalid-count';
    return;
  }
  const modalities = overlayModalities(snapshot, usage);
  if (modalities !== undefined) {
    snapshot.malformed ??= modalities;
    return;
  }
  const part = (key: string) => Math.max(0, countOf(usage, key));
  const prompt = part('promptTokenCount');
  if (part('cachedContentTokenCount') > prompt) snapshot.malformed ??= 'cache-exceeds-prompt';
  else if (
    total !== MISSING &&
    total !== prompt + part('candidatesTokenCount') + part('toolUsePromptTokenCount') + part('thoughtsTokenCount')
  ) {
    snapshot.malformed ??= 'total-mismatch';
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
export function generativeTokens(snapshot: GenerativeUsageSnapshot): ShapeReading {
  if (snapshot.malformed !== undefined) return snapshot.malformed;
  if (snapshot.promptTokens < 0) return 'invalid-count';
  const cached = Math.max(0, snapshot.cachedContentTokens);
  const input = Math.max(0, snapshot.promptTokens - cached) + Math.max(0, snapshot.toolUsePromptTokens);
  const output = Math.max(0, snapshot.candidatesTokens) + Math.max(0, snapshot.thoughtsTokens);
  // Each field is bounded, not their sums: a sum past the bound is no count a record can carry (costOf and the
  // recorder refuse it, and the answer would be lost with a throw), so it is malformed like any count past it.
  if (input > MAX_TOKEN_COUNT || output > MAX_TOKEN_COUNT) return 'invalid-count';
  const uncachedPart = (inPrompt: number, inCache: number) => Math.max(0, Math.max(0, inPrompt) - Math.max(0, inCache));
  const inputAudio = Math.min(input, uncachedPart(snapshot.promptAudioTokens, snapshot.cacheAudioTokens));
  const thoughts = Math.max(0, snapshot.thoughtsTokens);
  const outputAudio = Math.min(output - thoughts, Math.max(0, snapshot.candidatesAudioTokens));
  return withParts(
    { inputTokens: input, outputTokens: output, cachedInputTokens: cached, cacheCreationTokens: 0 },
    {
      reasoningTokens: thoughts,
      inputAudioTokens: inputAudio,
      inputImageTokens: Math.min(input - inputAudio, uncachedPart(snapshot.promptImageTokens, snapshot.cacheImageTokens)),
      outputAudioTokens: outputAudio,
      outputImageTokens: Math.min(output - thoughts - outputAudio, Math.max(0, snapshot.candidatesImageTokens)),
      webSearchCalls: Math.min(MAX_CALL_COUNT, snapshot.webSearchQueries),
    },
  );
}
