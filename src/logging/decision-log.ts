import type { Decision } from '../domain/decision';
import { CUSTOMER_KEY_PATTERN } from '../keys/customer-key';
import { upstreamProviderOf } from '../keys/upstream-key-shapes';
import type { Logger } from './logger';

const MAX_LOGGED_PATH = 200;

/**
 * Paths seen recently that needed no scrubbing. Most traffic goes to a
 * handful of paths, so this spares the per-segment key checks; a path that
 * did need scrubbing is never kept (it may hold a key).
 */
const CLEAN_PATHS = new Set<string>();
const MAX_CLEAN_PATHS = 2000;

/**
 * Paths are client-controlled and a confused client may put a key in one.
 * Any segment shaped like our key or a provider key is replaced.
 */
export function scrubPath(path: string): string {
  if (CLEAN_PATHS.has(path)) return path;
  const scrubbed = scrubSegments(path);
  if (scrubbed === path) {
    if (CLEAN_PATHS.size >= MAX_CLEAN_PATHS) CLEAN_PATHS.clear();
    CLEAN_PATHS.add(path);
  }
  return scrubbed;
}

function scrubSegments(path: string): string {
  const scrubbed = path
    .split('/')
    .map((segment) => (upstreamProviderOf(segment) ? '[redacted]' : segment.replace(CUSTOMER_KEY_PATTERN, '[redacted]')))
    .join('/');
  return scrubbed.length > MAX_LOGGED_PATH ? `${scrubbed.slice(0, MAX_LOGGED_PATH)}…` : scrubbed;
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
    logger.error({ ...line, detail: decision.internalDetail }, 'key store unavailable: request denied');
  } else {
    logger.info(line, decision.kind === 'allow' ? 'allowed' : 'denied');
  }
}
