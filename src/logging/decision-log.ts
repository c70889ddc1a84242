import type { Decision } from '../domain/decision';
import { CUSTOMER_KEY_PATTERN } from '../keys/customer-key';
import { upstreamProviderOf } from '../keys/upstream-key-shapes';
import type { Logger } from './logger';

const MAX_LOGGED_PATH = 200;

/**
 * Paths are client-controlled and a confused client may put a key in one.
 * Any segment shaped like our key or a provider key is replaced.
 */
export function scrubPath(path: string): string {
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
  };
  if (decision.kind === 'deny' && decision.reason === 'store_unavailable') {
    logger.error({ ...line, detail: decision.internalDetail }, 'key store unavailable: request denied');
  } else {
    logger.info(line, decision.kind === 'allow' ? 'allowed' : 'denied');
  }
}
