import type { RouteFamily } from '../check/routes/route';
import { MAX_TOKEN_COUNT, type NoUsageReason, type TokenCounts, type UsageOutcome, type UsageReading } from './usage';

/**
 * A chat-completions stream reports usage only when the request asked for it
 * (`stream_options: {"include_usage": true}`), and the official openai SDK
 * never asks by default. Making the upstream report it would mean rewriting
 * the request body, which ext_proc's observability mode cannot do (it
 * neither waits nor mutates), and waiting for the body would add latency to
 * every request. So such a response is charged an estimate, marked
 * `estimated` in every record, never silently nothing.
 *
 * The rule, one token per 4 bytes (OpenAI's rule of thumb of ~4 characters
 * per token for English text), counted in UTF-8 bytes so that scripts with
 * multi-byte characters are not undercounted by a per-character rule:
 * - output = ⌈delivered text bytes ÷ 4⌉: the decoded text of content,
 *   refusal and tool-call name/argument deltas (Responses API: its text
 *   deltas) that reached the client;
 * - input = ⌈request body bytes ÷ 4⌉: the whole JSON request body (the
 *   prompt and its JSON syntax, role names and parameters);
 * - no cached or cache-creation tokens.
 *
 * Error bound. Output: every token is at least one byte of text, so the true
 * count of the delivered text is at most 4 × the estimate; for prose and code
 * in the tokenizers of current OpenAI models it is typically within about
 * ±30%. Reasoning tokens that a model bills but does not stream are not
 * seen at all, so for reasoning models the estimate can be far below the
 * truth. Input: JSON syntax adds a few dozen tokens to every request, and
 * base64 images or audio count as text, far above what they are billed
 * (an image billed about a thousand tokens is typically 100 KB or more of
 * base64: 25,000 or more here).
 * The error thus leans towards the operator; a customer who wants exact
 * figures sets `include_usage`, and is then charged what the upstream reports.
 */
export const ESTIMATE_BYTES_PER_TOKEN = 4;

export function estimateTokens(deliveredTextBytes: number, requestBodyBytes: number): TokenCounts {
  return {
    inputTokens: tokensForBytes(requestBodyBytes),
    outputTokens: tokensForBytes(deliveredTextBytes),
    cachedInputTokens: 0,
    cacheCreationTokens: 0,
  };
}

/** The same counts with another output count: named members first (see eslint.config.mjs on hidden classes). */
function withOutputTokens(tokens: TokenCounts, outputTokens: number): TokenCounts {
  // The parts (reasoning, audio, 1-hour writes, calls) stay as reported: the raised output only adds plain output.
  const { inputTokens, cachedInputTokens, cacheCreationTokens, outputTokens: _reported, ...parts } = tokens;
  return { inputTokens, outputTokens, cachedInputTokens, cacheCreationTokens, ...parts };
}

/** ⌈bytes ÷ ESTIMATE_BYTES_PER_TOKEN⌉, at most MAX_TOKEN_COUNT; also a credit hold's input estimate (src/check/pipeline/hold-step.ts). */
export function tokensForBytes(bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes <= 0) return 0;
  return Math.min(MAX_TOKEN_COUNT, Math.ceil(bytes / ESTIMATE_BYTES_PER_TOKEN));
}

export interface MeteringContext {
  readonly family: RouteFamily;
  /**
   * Bytes of the request body as Envoy forwarded it to the upstream: Envoy's
   * `request.size` attribute, sent with the response headers (envoy.yaml's
   * ext_proc response_attributes). That is the request's content-length,
   * which Envoy holds the body to, or, when a client sends none (chunked,
   * HTTP/2), the body bytes Envoy received; never content-length read alone,
   * which would price such a request's input at nothing.
   */
  readonly requestBodyBytes: number;
  /** The request's answer carries no usage by design (see answersWithoutUsage): a successful one is estimated. */
  readonly answersWithoutUsage?: boolean;
}

/**
 * Readings that mean nothing generated was delivered: an error answer, a redirect, a request that is not a
 * generation, an answer that never came.
 */
const NOTHING_GENERATED: ReadonlySet<NoUsageReason> = new Set(['not-metered-request', 'error-status', 'not-success-status', 'no-response']);

/**
 * What is counted for a response. Reported usage is counted as reported,
 * except that a count that is not final never charges less output than the
 * text delivered (the rule above, marked estimated). A
 * successful chat-completions response without usable usage (a stream
 * without include_usage, one cut off before its usage chunk, a body the
 * processor could not read) is estimated as above. Messages and
 * generative-content responses always carry usage, so one without it is a
 * fault of the upstream: its reason is counted, and it costs nothing unless it
 * delivered text, which is estimated as above. Usage
 * that is malformed (see MalformedUsageReason) is estimated in every family,
 * and the record says why.
 */
export function usageOutcome(reading: UsageReading, context: MeteringContext): UsageOutcome {
  if (reading.kind === 'reported') {
    // A count that is not the last word can be far below what was delivered (Anthropic's message_start says 1 output
    // token until the final message_delta): a client that leaves just before it must not get the text for nothing.
    // Reasoning the count reports is output no text showed (OpenAI and Gemini stream none of it), so the text is a
    // floor for the rest of the output; Anthropic's thinking is streamed, and measured with the text.
    const delivered = reading.final ? 0 : tokensForBytes(reading.deliveredTextBytes ?? 0);
    const unseenReasoning = context.family === 'messages' ? 0 : (reading.tokens.reasoningTokens ?? 0);
    const floor = delivered > 0 ? Math.min(MAX_TOKEN_COUNT, unseenReasoning + delivered) : 0;
    const raised = floor > reading.tokens.outputTokens;
    return {
      kind: 'metered',
      usage: {
        tokens: raised ? withOutputTokens(reading.tokens, floor) : reading.tokens,
        ...(reading.model ? { model: reading.model } : {}),
        estimated: raised,
        final: reading.final,
        streamComplete: reading.streamComplete,
      },
    };
  }
  if (NOTHING_GENERATED.has(reading.reason)) return { kind: 'free', reason: reading.reason };
  // Malformed usage is estimated in every family: a report that contradicts itself is no upstream's last word, and
  // costing nothing would make such an answer free.
  const malformed = reading.reason === 'malformed-usage' ? (reading.malformed ?? 'invalid-count') : undefined;
  // Text that reached the client is never free: a messages or generative-content answer without usage is the
  // upstream's fault, yet what it delivered is estimated like a chat-completions stream's.
  if (
    context.family !== 'chat-completions' &&
    malformed === undefined &&
    context.answersWithoutUsage !== true &&
    reading.deliveredTextBytes === 0
  ) {
    return { kind: 'free', reason: reading.reason };
  }
  const estimate = estimateTokens(reading.deliveredTextBytes, context.requestBodyBytes);
  const pending = reading.pendingOutputTokens ?? 0;
  return {
    kind: 'metered',
    usage: {
      tokens: pending > estimate.outputTokens ? withOutputTokens(estimate, pending) : estimate,
      ...(reading.model ? { model: reading.model } : {}),
      estimated: true,
      ...(malformed !== undefined ? { malformed } : {}),
      final: reading.streamComplete,
      streamComplete: reading.streamComplete,
    },
  };
}
