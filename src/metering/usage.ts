/**
 * Token usage of one upstream response, split the way it is priced. The
 * three API styles report overlapping numbers (OpenAI's and Gemini's prompt
 * counts include cached tokens, Anthropic's input count excludes them); here
 * the four counts never overlap, so a cost is a plain sum of count × price.
 *
 * The optional fields are parts of one of the four (absent: 0), priced apart
 * where the operator sets a price for them: totals, token budgets and the
 * usage aggregates count only the four, so a part never counts twice.
 */
export interface TokenCounts {
  /** Input tokens at the full input price: neither read from nor written to a prompt cache. */
  readonly inputTokens: number;
  /** Generated tokens, including reasoning/thinking tokens (every style bills those as output). */
  readonly outputTokens: number;
  /** Input tokens read from a prompt cache. */
  readonly cachedInputTokens: number;
  /** Input tokens written to a prompt cache. */
  readonly cacheCreationTokens: number;
  /**
   * Of cacheCreationTokens, those written to a cache that lives an hour
   * (Anthropic's `cache_creation.ephemeral_1h_input_tokens`), which cost more
   * than 5-minute writes: priced at `cacheCreation1h`. The rest of the cache
   * writes are the 5-minute ones.
   */
  readonly cacheCreation1hTokens?: number;
  /** Of outputTokens, the reasoning/thinking tokens (OpenAI reasoning_tokens, Anthropic thinking_tokens, Gemini thoughtsTokenCount). */
  readonly reasoningTokens?: number;
  /** Of inputTokens (the uncached input), audio tokens. */
  readonly inputAudioTokens?: number;
  /** Of inputTokens (the uncached input), image tokens. */
  readonly inputImageTokens?: number;
  /** Of outputTokens, generated audio tokens (never reasoning). */
  readonly outputAudioTokens?: number;
  /** Of outputTokens, generated image tokens (never reasoning). */
  readonly outputImageTokens?: number;
  /**
   * Server-side web searches the answer reports (Anthropic's
   * `server_tool_use.web_search_requests`, Gemini's grounding queries): not
   * tokens, but priced per call beside them. At most MAX_CALL_COUNT.
   */
  readonly webSearchCalls?: number;
}

/** The parts of TokenCounts, each with the count it is a part of. */
export const TOKEN_PARTS = [
  ['cacheCreation1hTokens', 'cacheCreationTokens'],
  ['reasoningTokens', 'outputTokens'],
  ['inputAudioTokens', 'inputTokens'],
  ['inputImageTokens', 'inputTokens'],
  ['outputAudioTokens', 'outputTokens'],
  ['outputImageTokens', 'outputTokens'],
] as const satisfies readonly (readonly [keyof TokenCounts, keyof TokenCounts])[];

/**
 * The most server-side tool calls one answer is charged for: Anthropic caps
 * web searches per request with `max_uses` in the tens; 10^4 leaves room and
 * bounds the fees (see MAX_RESPONSE_COST_MINOR_UNITS).
 */
export const MAX_CALL_COUNT = 10_000;

/**
 * The largest count accepted in any one field of one response: 10^9 tokens,
 * a hundred times the largest context window offered today. A reported
 * count above it is treated as malformed usage. Together with
 * MAX_PRICE_PER_MILLION_TOKENS it bounds the cost of one response well
 * inside the credit bounds (see src/metering/price-table.ts).
 */
export const MAX_TOKEN_COUNT = 1_000_000_000;

export const ZERO_TOKENS: TokenCounts = Object.freeze({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 });

/** Every token the response processed or produced: what a token budget consumes. */
export function totalTokens(counts: TokenCounts): number {
  return counts.inputTokens + counts.outputTokens + counts.cachedInputTokens + counts.cacheCreationTokens;
}

export function isTokenCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= MAX_TOKEN_COUNT;
}

/** Why a response carries no usage to count. */
export type NoUsageReason =
  /** Not a generation request (a GET, a DELETE, or a family that is never metered). */
  | 'not-metered-request'
  /** The upstream answered 4xx/5xx: an error answer costs nothing. */
  | 'error-status'
  /** 1xx/3xx: no generation happened. */
  | 'not-success-status'
  /** Neither JSON nor server-sent events. */
  | 'unsupported-content-type'
  /** A compressed body (gzip, br…): Envoy must hand the processor the body as the upstream's identity encoding. */
  | 'unsupported-content-encoding'
  | 'empty-body'
  /** The body (or every event of the stream) was not valid JSON, or was cut off before its first complete document. */
  | 'malformed-body'
  /** A usage object was present but could not be believed: see MalformedUsageReason for why. */
  | 'malformed-usage'
  /** Well-formed, but no usage in it: a stream without `stream_options.include_usage`, or one cut off before its usage. */
  | 'no-usage-reported'
  /** The stream ended before the upstream's answer (its response headers) arrived: nothing was delivered. */
  | 'no-response';

/**
 * Why a usage object is malformed: the one list of them, and the `reason`
 * label of gateway_authz_ext_proc_malformed_usage_total. Each names a
 * relation the upstream's own API defines, so a real answer never breaks it;
 * one that does is not billed as reported (a count that contradicts its
 * neighbours says nothing reliable about what was served).
 */
export const MALFORMED_USAGE_REASONS = [
  /** A count missing where the API always sends it, or not a whole number from 0 to MAX_TOKEN_COUNT; a usage that is not an object. */
  'invalid-count',
  /** Cached reads (and cache writes) are a part of the prompt (OpenAI's prompt_tokens/input_tokens, Gemini's promptTokenCount) but exceed it. */
  'cache-exceeds-prompt',
  /** Reasoning (OpenAI) or thinking (Anthropic) tokens are a part of the output but exceed it. */
  'reasoning-exceeds-output',
  /** A total that is not the sum of its parts (OpenAI's total_tokens, Gemini's totalTokenCount). */
  'total-mismatch',
  /** Anthropic's cache_creation split (5-minute + 1-hour writes) does not sum to cache_creation_input_tokens. */
  'cache-write-split-mismatch',
  /** An audio or image count exceeds the count it is a part of (OpenAI's prompt/completion audio_tokens, a Gemini modality count). */
  'modality-exceeds-total',
  /** A server-side tool call count that is not a whole number from 0 to MAX_CALL_COUNT. */
  'invalid-call-count',
] as const;

export type MalformedUsageReason = (typeof MALFORMED_USAGE_REASONS)[number];

/** What the response itself says about its usage, before any estimate or price. */
export type UsageReading =
  | {
      readonly kind: 'reported';
      readonly tokens: TokenCounts;
      /** The model that served the request, as the response names it (absent if it names none). */
      readonly model?: string;
      /** The upstream's last word on the usage (false: a running or early count, e.g. a stream cut off mid-way). */
      readonly final: boolean;
      /** The body reached its protocol's end ([DONE], message_stop, a terminal event, the JSON's last byte). */
      readonly streamComplete: boolean;
      /**
       * On a reading that is not final only, when the stream delivered
       * generated text: its UTF-8 bytes, as below. A stream cut off before its
       * final usage (Anthropic's early output count of 1, a Gemini model that
       * reports its candidates only at the end) may have delivered far more.
       */
      readonly deliveredTextBytes?: number;
    }
  | {
      readonly kind: 'none';
      readonly reason: NoUsageReason;
      /** With reason `malformed-usage`: the first relation the usage broke. */
      readonly malformed?: MalformedUsageReason;
      readonly model?: string;
      readonly streamComplete: boolean;
      /**
       * UTF-8 bytes of generated text the client received (chat-completions
       * content, refusals, tool-call arguments; Responses API text deltas;
       * messages text, thinking and tool-input deltas; Gemini candidates'
       * text parts), for the estimate of a stream that reports no usage.
       */
      readonly deliveredTextBytes: number;
      /**
       * Output the upstream goes on generating after this answer, which no later answer on a metered route reports: a
       * background Responses API response (`"background": true`, queued), at its `max_output_tokens`, else the hold's
       * default. Counted into the estimate.
       */
      readonly pendingOutputTokens?: number;
    };

/** The usage that is counted for one response: reported by the upstream, or estimated when it reported none. */
export interface MeteredUsage {
  readonly tokens: TokenCounts;
  readonly model?: string;
  /** True when the counts are an estimate (see src/metering/usage-estimate.ts), never the upstream's report. */
  readonly estimated: boolean;
  /** Set when the upstream's usage was malformed and the estimate replaced it: why. */
  readonly malformed?: MalformedUsageReason;
  readonly final: boolean;
  readonly streamComplete: boolean;
}

/** Either the usage to count, or why the response costs nothing. */
export type UsageOutcome =
  { readonly kind: 'metered'; readonly usage: MeteredUsage } | { readonly kind: 'free'; readonly reason: NoUsageReason };
