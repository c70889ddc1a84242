/**
 * TEST CODE, not product: Envoy's `ext_authz` cluster and the ext_authz
 * filter's gRPC retry policy, as envoy.yaml configures them, for the
 * Envoy-faithful front (envoy-front.ts) when it stands before several
 * gateway-authz replicas.
 *
 * The settings are READ FROM envoy.yaml (clusters[ext_authz].health_checks,
 * the filter's grpc_service.retry_policy), so the rolling-restart test
 * exercises exactly what production Envoy is told to do. Behaviour mirrored:
 *  - load balancing: round robin over the hosts that pass the active health
 *    check; when none does, over all of them (Envoy's panic mode);
 *  - active health check: grpc.health.v1.Health/Check (service
 *    `service_name`) every `interval`, `timeout` each; a host turns unhealthy
 *    after `unhealthy_threshold` failed checks in a row (NOT_SERVING, an
 *    error or a timeout), healthy again after `healthy_threshold` passes;
 *  - retry (GrpcService.retry_policy): only for the retry_on conditions
 *    configured. gRPC reports connect-failure, refused-stream and the
 *    server's own UNAVAILABLE all as status 14, so any of the three in
 *    retry_on makes UNAVAILABLE retryable; nothing else is retried (a
 *    DEADLINE_EXCEEDED or an answered Check never is). At most
 *    `num_retries` retries; before each, Envoy's jittered back-off (a random
 *    wait below min(max_interval, base_interval × 2^n)); the
 *    previous_hosts predicate picks a host not tried yet when there is one
 *    (up to host_selection_retry_max_attempts picks). All attempts share the
 *    grpc_service `timeout`: a retry gets only what is left of it.
 *  - hosts can be replaced (`setHosts`), as STRICT_DNS re-resolution does
 *    when replicas come and go.
 * Not mirrored: outlier detection (passive ejection), connection pools and
 * circuit breakers.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parse } from 'yaml';
import { healthClient } from '../support/health-client';
import { createOfficialCheckClient, type OfficialCheckClient, type OfficialCheckResponse } from '../support/envoy-official-client';

export const ENVOY_YAML = path.join(__dirname, '..', '..', 'envoy.yaml');

export interface AuthzClusterSettings {
  retry: {
    /** retry_on, split. */
    retryOn: string[];
    numRetries: number;
    baseIntervalMs: number;
    maxIntervalMs: number;
    /** envoy.retry_host_predicates.previous_hosts is configured. */
    avoidPreviousHosts: boolean;
    hostSelectionMaxAttempts: number;
  };
  healthCheck: {
    serviceName: string;
    intervalMs: number;
    timeoutMs: number;
    unhealthyThreshold: number;
    healthyThreshold: number;
  };
}

/** Envoy duration text ("0.25s", "5s", "50ms") → milliseconds. */
export function durationMs(text: string | undefined, what: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(String(text ?? ''));
  if (!match) throw new Error(`${what}: expected a duration like 0.25s, got ${JSON.stringify(text)}`);
  return match[2] === 's' ? Number(match[1]) * 1000 : Number(match[1]);
}

/** The parts of envoy.yaml read here; a missing one is reported below. */
interface EnvoyYamlView {
  static_resources?: {
    listeners?: unknown;
    clusters?: {
      name?: string;
      health_checks?: {
        grpc_health_check?: { service_name?: string };
        interval?: string;
        timeout?: string;
        unhealthy_threshold?: number;
        healthy_threshold?: number;
      }[];
    }[];
  };
}

interface ExtAuthzConfigView {
  grpc_service: {
    envoy_grpc?: { cluster_name?: string };
    retry_policy?: {
      retry_on?: string;
      num_retries?: number;
      retry_back_off?: { base_interval?: string; max_interval?: string };
      retry_host_predicate?: { name?: string }[];
      host_selection_retry_max_attempts?: number;
    };
  };
}

function findExtAuthzFilter(node: unknown): ExtAuthzConfigView | undefined {
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = findExtAuthzFilter(item);
      if (found) return found;
    }
  } else if (node && typeof node === 'object') {
    const record = node as { name?: unknown; typed_config?: { grpc_service?: unknown } };
    if (record.name === 'envoy.filters.http.ext_authz' && record.typed_config?.grpc_service)
      return record.typed_config as ExtAuthzConfigView;
    for (const value of Object.values(record)) {
      const found = findExtAuthzFilter(value);
      if (found) return found;
    }
  }
  return undefined;
}

/** The ext_authz cluster's health check and the filter's retry policy, as envoy.yaml sets them. */
export function authzClusterSettingsFromEnvoyYaml(file = ENVOY_YAML): AuthzClusterSettings {
  const bootstrap = parse(fs.readFileSync(file, 'utf8')) as EnvoyYamlView;
  const filter = findExtAuthzFilter(bootstrap.static_resources?.listeners);
  if (!filter) throw new Error(`${file}: no envoy.filters.http.ext_authz filter with a grpc_service`);
  const clusterName = filter.grpc_service.envoy_grpc?.cluster_name;
  const cluster = (bootstrap.static_resources?.clusters ?? []).find((c) => c.name === clusterName);
  if (!cluster) throw new Error(`${file}: no cluster named ${clusterName}`);
  const retry = filter.grpc_service.retry_policy;
  if (!retry) throw new Error(`${file}: the ext_authz grpc_service has no retry_policy`);
  const check = cluster.health_checks?.[0];
  if (!check?.grpc_health_check) throw new Error(`${file}: cluster ${clusterName} has no gRPC health check`);
  const baseIntervalMs = durationMs(retry.retry_back_off?.base_interval, 'retry_back_off.base_interval');
  return {
    retry: {
      retryOn: String(retry.retry_on ?? '')
        .split(',')
        .map((condition) => condition.trim())
        .filter(Boolean),
      numRetries: Number(retry.num_retries ?? 1),
      baseIntervalMs,
      maxIntervalMs: retry.retry_back_off?.max_interval
        ? durationMs(retry.retry_back_off.max_interval, 'retry_back_off.max_interval')
        : baseIntervalMs * 10,
      avoidPreviousHosts: (retry.retry_host_predicate ?? []).some(
        (predicate) => predicate.name === 'envoy.retry_host_predicates.previous_hosts',
      ),
      hostSelectionMaxAttempts: Number(retry.host_selection_retry_max_attempts ?? 1),
    },
    healthCheck: {
      serviceName: String(check.grpc_health_check.service_name ?? ''),
      intervalMs: durationMs(check.interval, 'health_checks.interval'),
      timeoutMs: durationMs(check.timeout, 'health_checks.timeout'),
      unhealthyThreshold: Number(check.unhealthy_threshold),
      healthyThreshold: Number(check.healthy_threshold),
    },
  };
}

/** The gRPC codes the configured retry_on conditions make retryable. */
export function retryableCodes(retryOn: readonly string[]): Set<number> {
  const codes = new Set<number>();
  if (retryOn.some((condition) => ['connect-failure', 'refused-stream', 'unavailable'].includes(condition)))
    codes.add(grpc.status.UNAVAILABLE);
  if (retryOn.includes('cancelled')) codes.add(grpc.status.CANCELLED);
  if (retryOn.includes('resource-exhausted')) codes.add(grpc.status.RESOURCE_EXHAUSTED);
  if (retryOn.includes('internal')) codes.add(grpc.status.INTERNAL);
  return codes;
}

interface Host {
  address: string;
  client: OfficialCheckClient;
  health: ReturnType<typeof healthClient>;
  healthy: boolean;
  passes: number;
  failures: number;
  /** Check attempts sent to this host, and how they ended. */
  attempts: number;
  failed: number;
}

export interface AuthzClusterStats {
  /** Attempts per host address. */
  attempts: Record<string, number>;
  /** Attempts that failed with a gRPC error, per host address. */
  failedAttempts: Record<string, number>;
  retries: number;
  /** Checks that failed after all attempts, by gRPC code and details. */
  failures: Record<string, number>;
}

export class AuthzCluster {
  private hosts: Host[] = [];
  private next = 0;
  private retries = 0;
  private readonly failures: Record<string, number> = {};
  private readonly retryable: Set<number>;
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    addresses: readonly string[],
    readonly settings: AuthzClusterSettings = authzClusterSettingsFromEnvoyYaml(),
    private readonly random: () => number = Math.random,
  ) {
    this.retryable = retryableCodes(settings.retry.retryOn);
    this.setHosts(addresses);
    this.timer = setInterval(() => void this.runHealthChecks(), settings.healthCheck.intervalMs);
    this.timer.unref();
  }

  /** STRICT_DNS re-resolution: hosts no longer listed go, new ones join (healthy until a check says otherwise). */
  setHosts(addresses: readonly string[]): void {
    const kept = this.hosts.filter((host) => addresses.includes(host.address));
    for (const host of this.hosts) {
      if (!kept.includes(host)) this.closeHost(host);
    }
    const added = addresses
      .filter((address) => !kept.some((host) => host.address === address))
      .map<Host>((address) => ({
        address,
        client: createOfficialCheckClient(address),
        health: healthClient(address),
        healthy: true,
        passes: 0,
        failures: 0,
        attempts: 0,
        failed: 0,
      }));
    this.retired.push(...this.hosts.filter((host) => !kept.includes(host)));
    this.hosts = [...kept, ...added];
  }

  private readonly retired: Host[] = [];

  /** One round of active health checks (also run every `interval`). */
  async runHealthChecks(): Promise<void> {
    const { serviceName, timeoutMs, unhealthyThreshold, healthyThreshold } = this.settings.healthCheck;
    await Promise.all(
      this.hosts.map(async (host) => {
        const passed = await Promise.race([
          host.health.check(serviceName).then(
            (answer) => answer.status === 'SERVING',
            () => false,
          ),
          new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref()),
        ]);
        if (passed) {
          host.failures = 0;
          host.passes += 1;
          if (!host.healthy && host.passes >= healthyThreshold) host.healthy = true;
        } else {
          host.passes = 0;
          host.failures += 1;
          if (host.healthy && host.failures >= unhealthyThreshold) host.healthy = false;
        }
      }),
    );
  }

  healthyAddresses(): string[] {
    return this.hosts.filter((host) => host.healthy).map((host) => host.address);
  }

  /** Round robin over healthy hosts (all hosts when none is: panic mode), skipping `tried` when the predicate says so. */
  private pick(tried: ReadonlySet<Host>): Host {
    const healthy = this.hosts.filter((host) => host.healthy);
    const pool = healthy.length > 0 ? healthy : this.hosts;
    if (pool.length === 0) throw Object.assign(new Error('no hosts in the ext_authz cluster'), { code: grpc.status.UNAVAILABLE });
    const picks = this.settings.retry.avoidPreviousHosts ? Math.max(1, this.settings.retry.hostSelectionMaxAttempts) : 1;
    let host = pool[this.next++ % pool.length]!;
    for (let attempt = 1; attempt < picks && tried.has(host); attempt += 1) host = pool[this.next++ % pool.length]!;
    return host;
  }

  /** Check with Envoy's retry policy, all attempts within `timeoutMs`; rejects like a grpc-js call. */
  async check(request: object, timeoutMs: number): Promise<OfficialCheckResponse> {
    const deadline = Date.now() + timeoutMs;
    const tried = new Set<Host>();
    const { numRetries, baseIntervalMs, maxIntervalMs } = this.settings.retry;
    for (let attempt = 0; ; attempt += 1) {
      const host = this.pick(tried);
      tried.add(host);
      host.attempts += 1;
      try {
        return await host.client.check(request, Math.max(1, deadline - Date.now()));
      } catch (error) {
        host.failed += 1;
        const code = (error as { code?: number }).code;
        const backoff = this.random() * Math.min(maxIntervalMs, baseIntervalMs * 2 ** attempt);
        if (attempt >= numRetries || code === undefined || !this.retryable.has(code) || Date.now() + backoff >= deadline) {
          const what = `${code} ${(error as { details?: string }).details ?? ''}`;
          this.failures[what] = (this.failures[what] ?? 0) + 1;
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, backoff));
        this.retries += 1;
      }
    }
  }

  stats(): AuthzClusterStats {
    const all = [...this.retired, ...this.hosts];
    return {
      attempts: Object.fromEntries(all.map((host) => [host.address, host.attempts])),
      failedAttempts: Object.fromEntries(all.map((host) => [host.address, host.failed])),
      retries: this.retries,
      failures: { ...this.failures },
    };
  }

  private closeHost(host: Host): void {
    host.client.close();
    host.health.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    for (const host of this.hosts) this.closeHost(host);
  }
}
