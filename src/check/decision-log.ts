import type { Decision } from './decision';
import { CUSTOMER_KEY_PATTERN } from '../keys/customer-key';
import { upstreamProviderOf } from '../keys/upstream-key-shapes';
import type { Logger } from '../platform/logger';

const MAX_LOGGED_PATH = 200;

/**
 * Paths seen recently that needed no scrubbing. Most traffic goes to a
 * handful of paths, so this spares the per-segment key checks; a path that
 * did need scrubbing is never kept (it may hold a key).
 */
const CLEAN_PATHS = new Set<string>();
const MAX_CLEAN_PATHS = 2000;

/**
 * Paths are client-controlled and a confused client may put a key anywhere in
 * one: as a segment, after `key=`, after the `:` of a Gemini model name,
 * percent-encoded (`gk%5Flive%5F…`). The path is cut into tokens of the key
 * alphabet, where a `%XX` escape counts as part of its token; each token is
 * percent-decoded (twice, for double encoding) and replaced whole when it holds
 * our key's shape anywhere or starts with a provider key's shape. Everything
 * else is logged exactly as sent.
 */
export function scrubPath(path: string): string {
  if (CLEAN_PATHS.has(path)) return path;
  const scrubbed = scrubTokens(path);
  if (scrubbed === path) {
    if (CLEAN_PATHS.size >= MAX_CLEAN_PATHS) CLEAN_PATHS.clear();
    CLEAN_PATHS.add(path);
  }
  return scrubbed;
}

/** A run of key characters and escapes; shorter runs cannot hold any key shape. */
const TOKEN = /(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2}){12,}/g;
/** Inside a decoded token, the runs that an upstream key shape must start. */
const KEY_ALPHABET_RUN = /[A-Za-z0-9_-]+/g;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const CUSTOMER_KEY_ANYWHERE = new RegExp(CUSTOMER_KEY_PATTERN.source);
const MAX_DECODE_ROUNDS = 2;

function scrubTokens(path: string): string {
  const scrubbed = path.replace(TOKEN, (token) => (holdsKey(token) ? '[redacted]' : token));
  return scrubbed.length > MAX_LOGGED_PATH ? `${scrubbed.slice(0, MAX_LOGGED_PATH)}…` : scrubbed;
}

function holdsKey(token: string): boolean {
  let text = token;
  for (let round = 0; round < MAX_DECODE_ROUNDS && text.includes('%'); round += 1) {
    text = text.replace(ESCAPE, (_escape, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  if (CUSTOMER_KEY_ANYWHERE.test(text)) return true;
  for (const run of text.match(KEY_ALPHABET_RUN) ?? []) {
    if (upstreamProviderOf(run)) return true;
  }
  return false;
}

export interface DecisionLogContext {
  requestId: string;
  method: string;
  httpStatus: number;
  durationMs: number;
  /** Set when allowed decisions are sampled: each logged allow stands for 1/sampleRate of them. */
  sampleRate?: number;
}

/**
 * DECISION_LOG_SAMPLE: every denial is logged (they are what operators and
 * customers look for, and a flood of them is itself the signal); allowed
 * decisions are logged with probability `allowSample` (1 = every one). The
 * metrics count every decision either way.
 */
export function shouldLogDecision(decision: Decision, allowSample: number, random: () => number = Math.random): boolean {
  return decision.kind === 'deny' || allowSample >= 1 || (allowSample > 0 && random() < allowSample);
}

/** One line per decision; only the key's display prefix, never the key. */
export function logDecision(logger: Logger, decision: Decision, context: DecisionLogContext): void {
  const line = {
    event: 'decision',
    result: decision.kind,
    reason: decision.kind === 'deny' ? decision.reason : 'allowed',
    family: decision.route.family,
    style: decision.route.style,
    method: context.method,
    path: scrubPath(decision.route.pathWithoutQuery),
    httpStatus: context.httpStatus,
    requestId: context.requestId || undefined,
    keyPrefix: decision.kind === 'allow' ? decision.identity?.keyPrefix : decision.keyPrefix,
    accountId: decision.kind === 'allow' ? decision.identity?.accountId : decision.accountId,
    durationMs: Math.round(context.durationMs * 1000) / 1000,
    sampleRate: decision.kind === 'allow' && context.sampleRate !== undefined && context.sampleRate < 1 ? context.sampleRate : undefined,
  };
  if (decision.kind === 'deny' && decision.reason === 'store_unavailable') {
    logger.error(Object.assign(line, { detail: decision.internalDetail }), 'key store unavailable: request denied');
  } else {
    logger.info(line, decision.kind === 'allow' ? 'allowed' : 'denied');
  }
}
