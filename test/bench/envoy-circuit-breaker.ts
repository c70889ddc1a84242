/**
 * Envoy's ext_authz cluster circuit breaker, as the overload driver models it.
 * The limits are read from envoy.yaml itself, so the bench drives the
 * gateway with the bound that ships (one fact, one place).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from './processes';

export interface CircuitBreakerLimits {
  /** Connections Envoy may open to the cluster. */
  maxConnections: number;
  /** Requests with a stream on a connection, over the whole cluster. */
  maxRequests: number;
  /** Requests waiting for a connection with room. */
  maxPendingRequests: number;
}

/** Envoy's value for a threshold left unset (envoy.config.cluster.v3.CircuitBreakers.Thresholds). */
const ENVOY_DEFAULT_THRESHOLD = 1024;

interface ClusterYaml {
  name?: string;
  circuit_breakers?: {
    thresholds?: { priority?: string; max_connections?: number; max_pending_requests?: number; max_requests?: number }[];
  };
}

/** The ext_authz cluster's DEFAULT-priority thresholds in `file` (envoy.yaml by default). */
export function extAuthzCircuitBreaker(file = path.join(REPO_ROOT, 'envoy.yaml')): CircuitBreakerLimits {
  const config = parse(fs.readFileSync(file, 'utf8'), { merge: false }) as { static_resources?: { clusters?: ClusterYaml[] } };
  const cluster = config.static_resources?.clusters?.find((c) => c.name === 'ext_authz');
  if (!cluster) throw new Error(`${file}: no ext_authz cluster`);
  const threshold = cluster.circuit_breakers?.thresholds?.find((t) => (t.priority ?? 'DEFAULT') === 'DEFAULT');
  return {
    maxConnections: threshold?.max_connections ?? ENVOY_DEFAULT_THRESHOLD,
    maxRequests: threshold?.max_requests ?? ENVOY_DEFAULT_THRESHOLD,
    maxPendingRequests: threshold?.max_pending_requests ?? ENVOY_DEFAULT_THRESHOLD,
  };
}

/** What Envoy's pool does with a request: a stream now, a wait for a connection, or an overflow (503 at once). */
export type PoolDecision = 'attach' | 'pend' | 'overflow';

/**
 * A new request (Envoy's ConnPoolImplBase::newStreamImpl): with a connection
 * that has room it gets a stream unless `maxRequests` streams are open
 * (attachStreamToClient: "max streams overflow"); without one it waits unless
 * `maxPendingRequests` already do. An overflow is answered at once and never
 * retried (RetryStateImpl: "we never retry if the reset reason is overflow"),
 * so ext_authz answers it with status_on_error.
 */
export function newRequestDecision(
  limits: Pick<CircuitBreakerLimits, 'maxRequests' | 'maxPendingRequests'>,
  state: { streams: number; pending: number; connectionHasRoom: boolean },
): PoolDecision {
  if (state.connectionHasRoom) return state.streams >= limits.maxRequests ? 'overflow' : 'attach';
  return state.pending >= limits.maxPendingRequests ? 'overflow' : 'pend';
}

/** A pending request that a connection now has room for: attachStreamToClient checks `maxRequests` again. */
export function pendingRequestDecision(limits: Pick<CircuitBreakerLimits, 'maxRequests'>, streams: number): 'attach' | 'overflow' {
  return streams >= limits.maxRequests ? 'overflow' : 'attach';
}
