import type { ClientStyle } from '../routes/route';
import { describeWindow } from '../../accounts/limits/rate-limit';
import type { LimitScope, LimitState } from '../../accounts/limits/rate-limits';
import type { TokenBudgetState } from '../../accounts/limits/token-budgets';

/**
 * Rate-limit response headers, in the spelling each client style's SDK
 * reads. Used on allowed requests (most constrained limit after the request)
 * and on 429s (the limit that refused). Returns plain name/value pairs; the
 * caller wraps them in Envoy's overwrite HeaderValueOption.
 */
export type HeaderPair = readonly [name: string, value: string];

export interface RateLimitHeaderContext {
  /** Milliseconds since the Unix epoch: the messages style's reset header is a timestamp. */
  now: number;
  /** Accepted spellings of the messages-style version header; each one names a set of rate-limit headers. */
  versionHeaders: readonly string[];
}

/**
 * Upper bound of retry-after(-ms): the longest wait every SDK that reads the
 * header honours. openai 7 waits as told only up to 60 s and replaces a longer
 * wait by its own backoff of about a second, whose retry would only be refused
 * again; openai 6 and the Anthropic SDKs wait any length as told.
 */
export const MAX_RETRY_AFTER_MS = 60_000;

export function rateLimitHeaders(style: ClientStyle, state: LimitState, context: RateLimitHeaderContext): HeaderPair[] {
  switch (style) {
    case 'chat':
    case 'generic':
      return [
        ['x-ratelimit-limit-requests', String(state.limit)],
        ['x-ratelimit-remaining-requests', String(state.remaining)],
        ['x-ratelimit-reset-requests', openAiDuration(state.resetMs)],
      ];
    case 'messages': {
      const reset = rfc3339Seconds(context.now + state.resetMs);
      return context.versionHeaders.flatMap((versionHeader): HeaderPair[] => {
        // 'anthropic-version' → 'anthropic-ratelimit-requests-…', 'vendora-version' → 'vendora-ratelimit-requests-…'
        const prefix = `${versionHeader.replace(/-version$/, '')}-ratelimit-requests`;
        return [
          [`${prefix}-limit`, String(state.limit)],
          [`${prefix}-remaining`, String(state.remaining)],
          [`${prefix}-reset`, reset],
        ];
      });
    }
    case 'generative':
      // Google sends no rate-limit headers; the 429 body carries RetryInfo instead.
      return [];
  }
}

/**
 * Token rate-limit headers, as OpenAI and Anthropic send them next to the
 * request ones, from the budget with the fewest tokens left: on allowed
 * requests, and on a 429 token_budget_exhausted (the budget that refused).
 */
export function tokenBudgetHeaders(style: ClientStyle, state: TokenBudgetState, context: RateLimitHeaderContext): HeaderPair[] {
  switch (style) {
    case 'chat':
    case 'generic':
      return [
        ['x-ratelimit-limit-tokens', String(state.tokens)],
        ['x-ratelimit-remaining-tokens', String(state.remaining)],
        ['x-ratelimit-reset-tokens', openAiDuration(state.resetMs)],
      ];
    case 'messages': {
      const reset = rfc3339Seconds(context.now + state.resetMs);
      return context.versionHeaders.flatMap((versionHeader): HeaderPair[] => {
        const prefix = `${versionHeader.replace(/-version$/, '')}-ratelimit-tokens`;
        return [
          [`${prefix}-limit`, String(state.tokens)],
          [`${prefix}-remaining`, String(state.remaining)],
          [`${prefix}-reset`, reset],
        ];
      });
    }
    case 'generative':
      return [];
  }
}

/** What refused a 429: a request limit (LimitHit) or a token budget (TokenBudgetState). */
export interface Refusal {
  scope: LimitScope;
  windowSeconds: number;
  /** Milliseconds until one more request (or one token) is available. */
  retryAfterMs: number;
}

/** On every 429, whatever the style: when to retry, and which limit refused the request. */
export function limitHitHeaders(hit: Refusal): HeaderPair[] {
  const retryMs = retryAfterMs(hit);
  return [
    ['retry-after', String(Math.ceil(retryMs / 1000))],
    ['retry-after-ms', String(retryMs)],
    ['x-gateway-ratelimit-scope', hit.scope],
    ['x-gateway-ratelimit-window', describeWindow(hit.windowSeconds)],
  ];
}

/** Whole milliseconds, rounded up, within [1, 60 000]. */
export function retryAfterMs(hit: Refusal): number {
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(1, Math.ceil(hit.retryAfterMs)));
}

/**
 * OpenAI's duration spelling: under a second `"12ms"`; otherwise whole
 * seconds (rounded up) as h/m/s without leading zero units:
 * `"2s"`, `"1m1s"`, `"6m0s"`, `"1h0m0s"`.
 */
export function openAiDuration(ms: number): string {
  const wholeMs = Math.max(0, Math.ceil(ms));
  if (wholeMs < 1000) return `${wholeMs}ms`;
  const total = Math.ceil(wholeMs / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}

/** RFC 3339 in UTC with second precision, rounded up so it is never before the real reset: `"2026-11-22T12:01:00Z"`. */
export function rfc3339Seconds(epochMs: number): string {
  return new Date(Math.ceil(epochMs / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
