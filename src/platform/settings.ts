import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULT_ADMIN_AUTH_LIMITS, type AdminAuthLimits } from '../admin/admin-auth-limits';
import { DEFAULT_MAX_ACTIVE_KEYS, MAX_ACTIVE_KEYS_LIMIT } from '../keys/active-key-cap';
import type { RatePlan } from '../accounts/limits/rate-limits';
import type { StoreFailureMode } from '../check/deny-reasons';
import type { PipelineSettings } from '../check/pipeline/pipeline-settings';
import { DEFAULT_CURRENCY, type Currency } from '../accounts/money';
import { headerNamesFor } from '../check/routes/header-names';
import { buildRouteTable } from '../check/routes/route-table';
import type { RuntimePolicy } from './node-support';
import { configFileSchema, type ConfigFile } from './config-file';
import { operatorSignInEnv, operatorSignInOf, operatorSignInProblems, type OperatorSignInSettings } from './operator-sign-in-settings';
import { TRACE_PROPAGATORS, TRACES_SAMPLERS, type TracePropagator, type TracingSettings } from './tracing-settings';

/**
 * The one validated, frozen settings object, read once at start. Nothing else
 * in the service reads process.env.
 */
/** How account webhooks are delivered (src/webhooks/webhook-dispatcher.ts). */
export interface WebhookSettings {
  /** How often each replica looks for due deliveries. */
  readonly pollIntervalMs: number;
  /** Attempts per event and endpoint, the first included; after the last failed one the event is dropped for that endpoint. */
  readonly maxAttempts: number;
  /** The pause after the first failed attempt, doubled after each next one, with jitter (retryDelayMs). */
  readonly retryBaseMs: number;
  readonly retryMaxDelayMs: number;
  readonly connectTimeoutMs: number;
  /** The whole attempt, from the request to the end of the (bounded) answer. */
  readonly responseTimeoutMs: number;
  /** Failed attempts in a row (over all its events) that disable an endpoint. */
  readonly disableAfterFailures: number;
  /** Loopback, private and link-local targets allowed (never the cloud metadata addresses). */
  readonly allowPrivateTargets: boolean;
  /** Local development: endpoints on a loopback host, over plain http:// too. */
  readonly loopbackHttp: boolean;
}

export interface Settings {
  readonly grpcPort: number;
  readonly adminPort: number;
  /** The IP address each server listens on (GRPC_/ADMIN_/CUSTOMER_BIND_ADDRESS; brackets of an IPv6 literal removed). */
  readonly grpcBindAddress: string;
  readonly adminBindAddress: string;
  readonly customerBindAddress: string;
  /** Where Redis is: one server (REDIS_URL), a Sentinel-managed master, or a Cluster. Absent: in-memory. */
  readonly redis?: RedisTopology;
  readonly redisTimeoutMs: number;
  /** Deadline for admin calls and batched writes, which are not on Envoy's clock. */
  readonly redisAdminTimeoutMs: number;
  /** The break-glass token, with every permission; absent (not set, or ADMIN_TOKEN_ENABLED=false): only operators' own credentials work. */
  readonly adminToken?: string;
  /** Failed admin authentications allowed per client address and in total, per window. */
  readonly adminAuthLimits: AdminAuthLimits;
  readonly logLevel: LogLevel;
  /** Fraction of allowed decisions that get a log line (denials always do); 1 = one line per decision. */
  readonly decisionLogSample: number;
  readonly configFile?: string;
  readonly storeFailureMode: StoreFailureMode;
  readonly keyCache: { readonly maxEntries: number; readonly negativeTtlMs: number };
  /** How often last-used times are written (at most one write per key per interval). */
  readonly lastUsedFlushMs: number;
  readonly health: { readonly intervalMs: number; readonly timeoutMs: number };
  readonly shutdown: { readonly drainDelayMs: number; readonly timeoutMs: number };
  /** gRPC connections are closed (gracefully) after this age, so Envoy rebalances them across replicas. */
  readonly grpcMaxConnectionAgeMs: number;
  /** Processes serving the ports (node:cluster); 1 = this process alone. */
  readonly grpcWorkers: number;
  /** Checks decided at once per process; more are answered gRPC UNAVAILABLE at once instead of queueing. */
  readonly maxChecksInFlight: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised on each gRPC connection: what one client may have sent and not had answered. */
  readonly grpcMaxConcurrentStreams: number;
  /** The active-key cap of accounts that set none of their own. */
  readonly defaultMaxActiveKeys: number;
  /** ext_proc Process streams (answers being metered) open at once per process; more are refused (REFUSED_STREAM). */
  readonly extProcMaxStreams: number;
  readonly pipeline: PipelineSettings;
  /** What every amount counts (prices, balances, caps, costs), and how the dashboards, the CLI and the API show it. */
  readonly currency: Currency;
  /** The customer dashboard's own HTTP port (sign-in, sessions, the customer API); the admin port stays internal. */
  readonly customerPort: number;
  /** Absent: no identity provider is configured, and the customer dashboard says so. */
  readonly customerSignIn?: CustomerSignInSettings;
  /** Absent: operators authenticate with operator API tokens (or the break-glass ADMIN_TOKEN) only. */
  readonly operatorSignIn?: OperatorSignInSettings;
  /** Account webhooks (WEBHOOK_*; docs/concepts/webhooks.md). */
  readonly webhooks: WebhookSettings;
  readonly usage: {
    /** Usage records held in process while Redis does not answer; past it new records are dropped (and logged). */
    readonly bufferMaxRecords: number;
    /** Entries the usage stream keeps (approximately: Redis trims whole nodes). */
    readonly streamMaxLength: number;
    /** When a record applied to Redis may leave the buffer (USAGE_DURABILITY; docs/concepts/durability.md). */
    readonly durability: UsageDurability;
  };
  /** What `serve` does on an end-of-life Node.js major (NODE_ENV, ALLOW_END_OF_LIFE_NODE). */
  readonly runtime: RuntimePolicy;
  /** OpenTelemetry tracing (the standard OTEL_* variables); absent: off, and nothing of it runs per Check. */
  readonly tracing?: TracingSettings;
  /** Where GitHub's secret-scanning signing keys are (GITHUB_SECRET_SCANNING_KEYS); absent: the alert endpoint is off. */
  readonly secretScanningKeys?: SecretScanningKeySource;
}

/** GitHub's published key set: its URL (https://api.github.com/meta/public_keys/secret_scanning) or a file holding that JSON. */
export type SecretScanningKeySource = { readonly kind: 'url'; readonly url: string } | { readonly kind: 'file'; readonly path: string };

/** OpenID Connect sign-in for the customer dashboard (OIDC_* and CUSTOMER_SESSION_* settings). */
export interface CustomerSignInSettings {
  readonly issuerUrl: string;
  readonly clientId: string;
  /** Absent: a public client, which proves possession with PKCE alone. */
  readonly clientSecret?: string;
  /** Where the identity provider sends the browser back; its path is CUSTOMER_CALLBACK_PATH. */
  readonly redirectUrl: string;
  /** The redirect URL's origin: the dashboard as browsers see it (Origin checks, the cookie's scope). */
  readonly publicOrigin: string;
  readonly scopes: readonly string[];
  /** Which claim names a person: `sub` (scoped by issuer) or a verified `email`. */
  readonly identityClaim: IdentityClaim;
  /** Signs the session cookie; the same value on every replica, so any replica serves any session. */
  readonly sessionSecret: string;
  readonly sessionIdleMs: number;
  readonly sessionMaxAgeMs: number;
  /**
   * Plain-HTTP development on one machine: the redirect URL (and issuer) may be
   * http:// on a loopback host, and the session cookie then lacks `Secure`.
   */
  readonly plainHttpLocalhost: boolean;
}

export const IDENTITY_CLAIMS = ['sub', 'email'] as const;
export type IdentityClaim = (typeof IDENTITY_CLAIMS)[number];

/** The identity provider sends the browser back here; OIDC_REDIRECT_URL must end in this path. */
export const CUSTOMER_CALLBACK_PATH = '/auth/callback';
export const DEFAULT_OIDC_SCOPES = 'openid email profile';

export type RedisTopology =
  | { readonly mode: 'standalone'; readonly url: string }
  | { readonly mode: 'sentinel'; readonly sentinels: readonly HostPort[]; readonly masterName: string; readonly password?: string }
  | { readonly mode: 'cluster'; readonly nodes: readonly HostPort[]; readonly password?: string };

/**
 * When a usage record that Redis has applied is durable enough to leave the
 * process's buffer (docs/concepts/durability.md says what each guarantees):
 * - `acknowledged`: once Redis answers; as durable as Redis's own persistence.
 * - `appendfsync-always`: once Redis answers, which it does only after the AOF
 *   is fsynced; checked at start and with every batch (CONFIG GET).
 * - `wait-replicas`: once `WAIT replicas timeoutMs` counts that many replicas.
 * - `waitaof`: once `WAITAOF 1 replicas timeoutMs` reports the local AOF and
 *   that many replicas' AOFs fsynced (Redis 7.2 or later, `appendonly yes`).
 */
export type UsageDurability =
  | { readonly mode: 'acknowledged' | 'appendfsync-always' }
  | { readonly mode: 'wait-replicas' | 'waitaof'; readonly replicas: number; readonly timeoutMs: number };

export const USAGE_DURABILITY_MODES = ['acknowledged', 'appendfsync-always', 'wait-replicas', 'waitaof'] as const;

/**
 * How long one WAIT or WAITAOF may block the usage connection: half a second,
 * a fraction of REDIS_ADMIN_TIMEOUT_MS (which must outlast it: the client
 * would otherwise give up on the WAIT first), and short enough that records
 * held while a replica is away are tried again within seconds.
 */
export const DEFAULT_USAGE_DURABILITY_TIMEOUT_MS = 500;

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The `anthropic-version` values the current official SDKs send: 2023-06-01
 * (@anthropic-ai/sdk 0.x) and 2026-10-21 (1.x), so either works out of the box.
 * The config file's `messagesVersions` replaces the list (e.g. to narrow it).
 */
export const DEFAULT_MESSAGES_VERSIONS: readonly string[] = ['2023-06-01', '2026-10-21'];

/** Used when the config file sets no defaultPlan: generous, but never unlimited. */
export const DEFAULT_PLAN: RatePlan = {
  key: [
    { limit: 600, windowSeconds: 60 },
    { limit: 100_000, windowSeconds: 86_400 },
  ],
  account: [
    { limit: 3_000, windowSeconds: 60 },
    { limit: 1_000_000, windowSeconds: 86_400 },
  ],
};

/**
 * Little's law: Checks in flight ≈ rate × time in the service. At the ~5,000
 * decisions/s one process makes at saturation on the development machine, 256
 * in flight is ~50 ms of queue (REDIS_TIMEOUT_MS's default), well inside
 * Envoy's 250 ms; at saturation the bench keeps only 64 in flight. See docs/performance/README.md.
 */
export const DEFAULT_MAX_CHECKS_IN_FLIGHT = 256;

/**
 * A stream counts against SETTINGS_MAX_CONCURRENT_STREAMS from the client's
 * HEADERS until the answer, so this bounds what one connection can have
 * waiting unread in the socket, where no admission can see it. 100 is
 * Envoy's own downstream value (envoy.yaml) and the HTTP/2 recommended
 * minimum (RFC 9113 §6.5.2); Envoy opens another connection when one is
 * full. See docs/operations/README.md (Overload).
 */
export const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS = 100;

/**
 * One Process stream per answer in flight through Envoy. An open stream
 * measured about 31 KiB of resident memory (docs/concepts/metering.md), so
 * 5,000 keeps them near 155 MB of the container's 512 MiB; a process with
 * more answers streaming at once than that is rare, and one past the bound
 * is refused and counted, never a crash. Raise it with the memory limit.
 */
export const DEFAULT_EXT_PROC_MAX_STREAMS = 5_000;

/**
 * 100,000 records: about 40 MB of heap (docs/concepts/metering.md), and
 * several minutes of a busy replica's usage while Redis is away.
 */
export const DEFAULT_USAGE_BUFFER_MAX_RECORDS = 100_000;

/**
 * The usage stream's bound: 1,000,000 entries, about 0.4 GB in Redis
 * (docs/concepts/metering.md); a day of 11 metered answers per second. Size
 * it for the longest time the billing consumer may be away.
 */
export const DEFAULT_USAGE_STREAM_MAX_LENGTH = 1_000_000;

/**
 * Every server listens on loopback unless told otherwise: a service started
 * by hand (`npm start`) is then reachable from this machine only, and a
 * deployment that needs more says so in its own manifest (docker-compose.yml,
 * deploy/deployment.yaml, the Dockerfile). See docs/operations/network-exposure.md.
 */
export const DEFAULT_BIND_ADDRESS = '127.0.0.1';

// An empty value means "use the default", not port 0 (a random port).
const blankAsUnset = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);
const port = (fallback: number) => z.preprocess(blankAsUnset, z.coerce.number().int().min(0).max(65535).default(fallback));
const optionalText = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));

const hostPortList = optionalText.transform((text, context): HostPort[] | undefined => {
  if (text === undefined) return undefined;
  const entries = text.split(',').map((entry) => entry.trim());
  const parsed = entries.map((entry) => /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(entry));
  const bad = entries.filter((_, index) => !parsed[index]);
  if (bad.length > 0) {
    context.addIssue({ code: 'custom', message: `must be a comma-separated list of host:port, got '${bad.join("', '")}'` });
    return z.NEVER;
  }
  return parsed.map((match) => ({ host: match![1]!.replace(/^\[|\]$/g, ''), port: Number(match![2]) }));
});

/**
 * An IP literal to listen on; `[::1]` is read as `::1`. Not a host name: one
 * that resolves to several addresses would listen on whichever came first.
 */
const bindAddress = z.preprocess(
  blankAsUnset,
  z
    .string()
    .default(DEFAULT_BIND_ADDRESS)
    .transform((text, context) => {
      const address = text.trim().replace(/^\[(.*)\]$/, '$1');
      if (isIP(address) === 0) {
        context.addIssue({
          code: 'custom',
          message: `must be an IP address to listen on, such as 127.0.0.1, ::1, 0.0.0.0 or :: (got '${text}')`,
        });
        return z.NEVER;
      }
      return address;
    }),
);

/** OTLP/HTTP's own default (the OpenTelemetry exporter specification): a collector on this machine. */
export const DEFAULT_OTLP_ENDPOINT = 'http://localhost:4318';
/** What the OTLP/HTTP exporter specification appends to OTEL_EXPORTER_OTLP_ENDPOINT for traces. */
const OTLP_TRACES_PATH = 'v1/traces';
/** The one OTLP encoding the exporter here speaks. */
const OTLP_PROTOCOL = 'http/protobuf';

const otlpEndpoint = optionalText.refine((url) => url === undefined || /^https?:$/.test(parsedUrl(url)?.protocol ?? ''), {
  message: 'must be an http:// or https:// URL (OTLP over HTTP)',
});
const otlpProtocol = optionalText.refine((value) => value === undefined || value === OTLP_PROTOCOL, {
  message: `only ${OTLP_PROTOCOL} is supported (OTLP over HTTP, protobuf-encoded); grpc and http/json are not`,
});

/** Exported so docs/configuration/settings.md can be held to it (test/docs/settings-table.test.ts). */
export const envSchema = z.object({
  GRPC_PORT: port(9191),
  ADMIN_PORT: port(9192),
  GRPC_BIND_ADDRESS: bindAddress,
  ADMIN_BIND_ADDRESS: bindAddress,
  CUSTOMER_BIND_ADDRESS: bindAddress,
  // Its one address for every server became three; a configuration that still sets it is refused rather than moved to loopback unnoticed.
  BIND_ADDRESS: z.preprocess(
    blankAsUnset,
    z
      .string()
      .optional()
      .refine((value) => value === undefined, {
        message:
          'replaced by GRPC_BIND_ADDRESS, ADMIN_BIND_ADDRESS and CUSTOMER_BIND_ADDRESS (each 127.0.0.1 unless set); set those instead',
      }),
  ),
  REDIS_URL: optionalText.refine((url) => url === undefined || /^rediss?:\/\/.+/.test(url), {
    message: 'must be a redis:// or rediss:// URL',
  }),
  REDIS_SENTINELS: hostPortList,
  REDIS_SENTINEL_MASTER: optionalText,
  REDIS_CLUSTER_NODES: hostPortList,
  REDIS_PASSWORD: optionalText,
  REDIS_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(1000).default(50)),
  REDIS_ADMIN_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(60_000).default(2_000)),
  ADMIN_TOKEN: optionalText
    .refine((token) => token === undefined || token.length >= 16, {
      message: 'must be at least 16 characters (use a long random value)',
    })
    .refine((token) => token === undefined || !/\s/.test(token), {
      message: "must not contain whitespace: 'Authorization: Bearer <token>' carries one word, so such a token could never match",
    }),
  // false turns the break-glass ADMIN_TOKEN off while it stays in the secret store, for the next emergency.
  ADMIN_TOKEN_ENABLED: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('true')),
  ADMIN_AUTH_FAILURES_PER_ADDRESS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1).max(1_000).default(DEFAULT_ADMIN_AUTH_LIMITS.failuresPerAddress),
  ),
  // At most 4,000: the limiter's bounded address table (10,000) then always has room for every live window.
  ADMIN_AUTH_FAILURES_TOTAL: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1).max(4_000).default(DEFAULT_ADMIN_AUTH_LIMITS.failuresTotal),
  ),
  ADMIN_AUTH_FAILURE_WINDOW_MS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1_000).max(86_400_000).default(DEFAULT_ADMIN_AUTH_LIMITS.windowMs),
  ),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  DECISION_LOG_SAMPLE: z.preprocess(blankAsUnset, z.coerce.number().min(0).max(1).default(1)),
  CONFIG_FILE: optionalText,
  STORE_FAILURE_MODE: z.enum(['deny', 'grpc-unavailable']).default('deny'),
  KEY_CACHE_MAX_ENTRIES: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(10_000_000).default(200_000)),
  KEY_CACHE_NEGATIVE_TTL_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(0).max(60_000).default(2_000)),
  LAST_USED_FLUSH_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(100).max(3_600_000).default(30_000)),
  HEALTH_INTERVAL_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(50).max(60_000).default(1_000)),
  HEALTH_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(10).max(10_000).default(500)),
  SHUTDOWN_DRAIN_DELAY_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(0).max(120_000).default(0)),
  SHUTDOWN_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(100).max(300_000).default(10_000)),
  GRPC_MAX_CONNECTION_AGE_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1_000).max(86_400_000).default(300_000)),
  GRPC_WORKERS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(64).default(1)),
  MAX_CHECKS_IN_FLIGHT: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(100_000).default(DEFAULT_MAX_CHECKS_IN_FLIGHT)),
  GRPC_MAX_CONCURRENT_STREAMS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1).max(10_000).default(DEFAULT_GRPC_MAX_CONCURRENT_STREAMS),
  ),
  DEFAULT_MAX_ACTIVE_KEYS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1).max(MAX_ACTIVE_KEYS_LIMIT).default(DEFAULT_MAX_ACTIVE_KEYS),
  ),
  EXT_PROC_MAX_STREAMS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_EXT_PROC_MAX_STREAMS)),
  CUSTOMER_PORT: port(9193),
  OIDC_ISSUER_URL: optionalText,
  OIDC_CLIENT_ID: optionalText,
  OIDC_CLIENT_SECRET: optionalText,
  OIDC_REDIRECT_URL: optionalText,
  OIDC_SCOPES: z.preprocess(blankAsUnset, z.string().default(DEFAULT_OIDC_SCOPES)),
  OIDC_IDENTITY_CLAIM: z.preprocess(blankAsUnset, z.enum(IDENTITY_CLAIMS).default('sub')),
  CUSTOMER_SESSION_SECRET: optionalText,
  // 1 minute to 1 day without a request; 5 minutes to 30 days in all.
  CUSTOMER_SESSION_IDLE_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(60_000).max(86_400_000).default(1_800_000)),
  CUSTOMER_SESSION_MAX_AGE_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(300_000).max(2_592_000_000).default(43_200_000)),
  CUSTOMER_PLAIN_HTTP_LOCALHOST: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
  GITHUB_SECRET_SCANNING_KEYS: optionalText,
  ...operatorSignInEnv,
  NODE_ENV: optionalText,
  WEBHOOK_POLL_INTERVAL_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(10).max(60_000).default(1_000)),
  WEBHOOK_MAX_ATTEMPTS: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(20).default(10)),
  WEBHOOK_RETRY_BASE_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(10).max(3_600_000).default(30_000)),
  WEBHOOK_RETRY_MAX_DELAY_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(10).max(86_400_000).default(14_400_000)),
  WEBHOOK_CONNECT_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(100).max(60_000).default(5_000)),
  WEBHOOK_RESPONSE_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(100).max(120_000).default(15_000)),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.preprocess(blankAsUnset, z.coerce.number().int().min(1).max(10_000).default(50)),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
  WEBHOOK_LOOPBACK_HTTP: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
  ALLOW_END_OF_LIFE_NODE: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
  USAGE_BUFFER_MAX_RECORDS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(100).max(10_000_000).default(DEFAULT_USAGE_BUFFER_MAX_RECORDS),
  ),
  USAGE_STREAM_MAX_LEN: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1_000).max(1_000_000_000).default(DEFAULT_USAGE_STREAM_MAX_LENGTH),
  ),
  USAGE_DURABILITY: z.preprocess(blankAsUnset, z.enum(USAGE_DURABILITY_MODES).default('acknowledged')),
  USAGE_DURABILITY_REPLICAS: z.preprocess(blankAsUnset, z.coerce.number().int().min(0).max(100).optional()),
  USAGE_DURABILITY_TIMEOUT_MS: z.preprocess(
    blankAsUnset,
    z.coerce.number().int().min(1).max(60_000).default(DEFAULT_USAGE_DURABILITY_TIMEOUT_MS),
  ),
  OTEL_SDK_DISABLED: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
  OTEL_TRACES_EXPORTER: z.preprocess(
    blankAsUnset,
    z.enum(['none', 'otlp'], { message: "must be 'otlp' (export spans over OTLP/HTTP) or 'none' (no tracing)" }).default('none'),
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpEndpoint,
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol,
  OTEL_TRACES_SAMPLER: z.preprocess(
    blankAsUnset,
    z.enum(TRACES_SAMPLERS, { message: `must be one of ${TRACES_SAMPLERS.join(', ')}` }).default('parentbased_always_on'),
  ),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(blankAsUnset, z.coerce.number().min(0).max(1).optional()),
  OTEL_SERVICE_NAME: z.preprocess(blankAsUnset, z.string().trim().min(1).default('gateway-authz')),
  OTEL_PROPAGATORS: z.preprocess(
    blankAsUnset,
    z
      .string()
      .default('tracecontext')
      .transform((text, context): TracePropagator[] => {
        const names = text
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean);
        const unknown = names.filter(
          (name) => name !== 'baggage' && name !== 'none' && !(TRACE_PROPAGATORS as readonly string[]).includes(name),
        );
        if (unknown.length > 0) {
          context.addIssue({
            code: 'custom',
            message: `unknown propagator '${unknown.join("', '")}': the trace can be read with ${TRACE_PROPAGATORS.join(', ')} (baggage is accepted and not read)`,
          });
          return z.NEVER;
        }
        return names.filter((name): name is TracePropagator => (TRACE_PROPAGATORS as readonly string[]).includes(name));
      }),
  ),
});

export type SettingsResult = { ok: true; settings: Settings } | { ok: false; problems: string[] };

export function loadSettings(
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): SettingsResult {
  const problems: string[] = [];
  const parsedEnv = envSchema.safeParse(env);
  if (!parsedEnv.success) problems.push(...parsedEnv.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`));

  let config: ConfigFile = {};
  const configPath = parsedEnv.success ? parsedEnv.data.CONFIG_FILE : env.CONFIG_FILE?.trim() || undefined;
  if (configPath) {
    const loaded = loadConfigFile(configPath, readFile);
    if (loaded.ok) config = loaded.config;
    else problems.push(...loaded.problems);
  }
  if (parsedEnv.success) {
    problems.push(
      ...redisTopologyProblems(parsedEnv.data),
      ...adminAuthProblems(parsedEnv.data),
      ...customerSignInProblems(parsedEnv.data),
      ...operatorSignInProblems(parsedEnv.data),
      ...usageDurabilityProblems(parsedEnv.data),
      ...tracingProblems(parsedEnv.data),
      ...secretScanningKeysProblems(parsedEnv.data),
    );
  }
  if (problems.length > 0 || !parsedEnv.success) return { ok: false, problems };

  const e = parsedEnv.data;
  const redis = redisTopologyOf(e);
  const currency = config.currency ?? DEFAULT_CURRENCY;
  const settings: Settings = {
    grpcPort: e.GRPC_PORT,
    adminPort: e.ADMIN_PORT,
    grpcBindAddress: e.GRPC_BIND_ADDRESS,
    adminBindAddress: e.ADMIN_BIND_ADDRESS,
    customerBindAddress: e.CUSTOMER_BIND_ADDRESS,
    ...(redis ? { redis } : {}),
    redisTimeoutMs: e.REDIS_TIMEOUT_MS,
    redisAdminTimeoutMs: e.REDIS_ADMIN_TIMEOUT_MS,
    ...(e.ADMIN_TOKEN && e.ADMIN_TOKEN_ENABLED === 'true' ? { adminToken: e.ADMIN_TOKEN } : {}),
    adminAuthLimits: {
      failuresPerAddress: e.ADMIN_AUTH_FAILURES_PER_ADDRESS,
      failuresTotal: e.ADMIN_AUTH_FAILURES_TOTAL,
      windowMs: e.ADMIN_AUTH_FAILURE_WINDOW_MS,
    },
    logLevel: e.LOG_LEVEL,
    decisionLogSample: e.DECISION_LOG_SAMPLE,
    ...(e.CONFIG_FILE ? { configFile: e.CONFIG_FILE } : {}),
    storeFailureMode: e.STORE_FAILURE_MODE,
    keyCache: { maxEntries: e.KEY_CACHE_MAX_ENTRIES, negativeTtlMs: e.KEY_CACHE_NEGATIVE_TTL_MS },
    lastUsedFlushMs: e.LAST_USED_FLUSH_MS,
    health: { intervalMs: e.HEALTH_INTERVAL_MS, timeoutMs: e.HEALTH_TIMEOUT_MS },
    shutdown: { drainDelayMs: e.SHUTDOWN_DRAIN_DELAY_MS, timeoutMs: e.SHUTDOWN_TIMEOUT_MS },
    grpcMaxConnectionAgeMs: e.GRPC_MAX_CONNECTION_AGE_MS,
    grpcWorkers: e.GRPC_WORKERS,
    maxChecksInFlight: e.MAX_CHECKS_IN_FLIGHT,
    grpcMaxConcurrentStreams: e.GRPC_MAX_CONCURRENT_STREAMS,
    defaultMaxActiveKeys: e.DEFAULT_MAX_ACTIVE_KEYS,
    extProcMaxStreams: e.EXT_PROC_MAX_STREAMS,
    customerPort: e.CUSTOMER_PORT,
    ...(e.OIDC_ISSUER_URL ? { customerSignIn: customerSignInOf(e) } : {}),
    ...(e.OPERATOR_OIDC_ISSUER_URL ? { operatorSignIn: operatorSignInOf(e)! } : {}),
    webhooks: {
      pollIntervalMs: e.WEBHOOK_POLL_INTERVAL_MS,
      maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
      retryMaxDelayMs: e.WEBHOOK_RETRY_MAX_DELAY_MS,
      connectTimeoutMs: e.WEBHOOK_CONNECT_TIMEOUT_MS,
      responseTimeoutMs: e.WEBHOOK_RESPONSE_TIMEOUT_MS,
      disableAfterFailures: e.WEBHOOK_DISABLE_AFTER_FAILURES,
      allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS === 'true',
      loopbackHttp: e.WEBHOOK_LOOPBACK_HTTP === 'true',
    },
    usage: { bufferMaxRecords: e.USAGE_BUFFER_MAX_RECORDS, streamMaxLength: e.USAGE_STREAM_MAX_LEN, durability: usageDurabilityOf(e) },
    runtime: { production: e.NODE_ENV === 'production', allowEndOfLifeNode: e.ALLOW_END_OF_LIFE_NODE === 'true' },
    ...(tracingEnabled(e) ? { tracing: tracingOf(e) } : {}),
    ...(e.GITHUB_SECRET_SCANNING_KEYS ? { secretScanningKeys: secretScanningKeysOf(e.GITHUB_SECRET_SCANNING_KEYS) } : {}),
    currency,
    pipeline: {
      routeTable: buildRouteTable(config.routes ?? {}, config.publicRoutes ?? [], config.enabledRoutes ?? []),
      headerNames: headerNamesFor(config.acceptVendorHeaderSpellings ?? true),
      acceptedVersions: config.messagesVersions ?? DEFAULT_MESSAGES_VERSIONS,
      acceptQueryKey: config.acceptQueryKey ?? false,
      defaultPlan: {
        key: config.defaultPlan?.key ?? DEFAULT_PLAN.key,
        account: config.defaultPlan?.account ?? DEFAULT_PLAN.account,
      },
      defaultTokenBudgets: {
        key: config.defaultPlan?.tokenBudgets?.key ?? [],
        account: config.defaultPlan?.tokenBudgets?.account ?? [],
      },
      ...(config.pricing ? { pricing: config.pricing } : {}),
      currency,
    },
  };
  return { ok: true, settings: deepFreeze(settings) };
}

type ParsedEnv = z.output<typeof envSchema>;

function redisTopologyProblems(e: ParsedEnv): string[] {
  const chosen = [
    e.REDIS_URL && 'REDIS_URL',
    e.REDIS_SENTINELS && 'REDIS_SENTINELS',
    e.REDIS_CLUSTER_NODES && 'REDIS_CLUSTER_NODES',
  ].filter(Boolean);
  const problems: string[] = [];
  if (chosen.length > 1) problems.push(`Redis: set only one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES (got ${chosen.join(', ')})`);
  if (e.REDIS_SENTINELS && !e.REDIS_SENTINEL_MASTER)
    problems.push('REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS (the monitored master name)');
  if (e.REDIS_SENTINEL_MASTER && !e.REDIS_SENTINELS) problems.push('REDIS_SENTINEL_MASTER: only meaningful with REDIS_SENTINELS');
  if (e.GRPC_WORKERS > 1 && chosen.length === 0) {
    problems.push(
      'GRPC_WORKERS: more than one worker needs Redis (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES); the in-memory store would differ in every worker',
    );
  }
  return problems;
}

function usageDurabilityProblems(e: ParsedEnv): string[] {
  const mode = e.USAGE_DURABILITY;
  const problems: string[] = [];
  const waits = mode === 'wait-replicas' || mode === 'waitaof';
  if (mode !== 'acknowledged' && !e.REDIS_URL && !e.REDIS_SENTINELS && !e.REDIS_CLUSTER_NODES) {
    problems.push(
      `USAGE_DURABILITY: ${mode} needs Redis (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES); the in-memory store keeps nothing`,
    );
  }
  if (waits && e.REDIS_CLUSTER_NODES) {
    problems.push(
      `USAGE_DURABILITY: ${mode} is not supported on Redis Cluster (a WAIT must reach the master that took each write); use appendfsync-always on every master`,
    );
  }
  if (mode === 'wait-replicas' && (e.USAGE_DURABILITY_REPLICAS ?? 0) < 1) {
    problems.push(
      'USAGE_DURABILITY_REPLICAS: required with USAGE_DURABILITY=wait-replicas, at least 1 (the replicas each record must reach)',
    );
  }
  if (!waits && e.USAGE_DURABILITY_REPLICAS !== undefined) {
    problems.push('USAGE_DURABILITY_REPLICAS: only meaningful with USAGE_DURABILITY=wait-replicas or waitaof');
  }
  if (waits && e.USAGE_DURABILITY_TIMEOUT_MS >= e.REDIS_ADMIN_TIMEOUT_MS) {
    problems.push(
      `USAGE_DURABILITY_TIMEOUT_MS: must be below REDIS_ADMIN_TIMEOUT_MS (${e.REDIS_ADMIN_TIMEOUT_MS}), or the client gives up on the wait before Redis answers it`,
    );
  }
  return problems;
}

function usageDurabilityOf(e: ParsedEnv): UsageDurability {
  const mode = e.USAGE_DURABILITY;
  if (mode === 'acknowledged' || mode === 'appendfsync-always') return { mode };
  return { mode, replicas: e.USAGE_DURABILITY_REPLICAS ?? 0, timeoutMs: e.USAGE_DURABILITY_TIMEOUT_MS };
}

function tracingEnabled(e: ParsedEnv): boolean {
  return e.OTEL_TRACES_EXPORTER === 'otlp' && e.OTEL_SDK_DISABLED === 'false';
}

/** A half-set tracing configuration is refused rather than silently left off. */
function tracingProblems(e: ParsedEnv): string[] {
  const problems: string[] = [];
  if (e.OTEL_TRACES_EXPORTER === 'none') {
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] as const) {
      if (e[name] !== undefined)
        problems.push(`${name}: set, but OTEL_TRACES_EXPORTER is none (tracing is off unless OTEL_TRACES_EXPORTER=otlp)`);
    }
  }
  if (e.OTEL_TRACES_SAMPLER_ARG !== undefined && !e.OTEL_TRACES_SAMPLER.endsWith('traceidratio')) {
    problems.push(
      `OTEL_TRACES_SAMPLER_ARG: only meaningful with OTEL_TRACES_SAMPLER=traceidratio or parentbased_traceidratio (got ${e.OTEL_TRACES_SAMPLER})`,
    );
  }
  if (tracingEnabled(e) && e.OTEL_PROPAGATORS.length === 0) {
    problems.push('OTEL_PROPAGATORS: names no propagator the trace can be read with (tracecontext, b3, b3multi)');
  }
  return problems;
}

/** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given; OTEL_EXPORTER_OTLP_ENDPOINT is a base, to which v1/traces is added. */
function tracingOf(e: ParsedEnv): TracingSettings {
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT ?? DEFAULT_OTLP_ENDPOINT;
  return {
    tracesUrl: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${base.endsWith('/') ? base : `${base}/`}${OTLP_TRACES_PATH}`,
    serviceName: e.OTEL_SERVICE_NAME,
    sampler: e.OTEL_TRACES_SAMPLER,
    samplerRatio: e.OTEL_TRACES_SAMPLER_ARG ?? 1,
    propagators: e.OTEL_PROPAGATORS,
  };
}

function adminAuthProblems(e: ParsedEnv): string[] {
  if (e.ADMIN_AUTH_FAILURES_PER_ADDRESS <= e.ADMIN_AUTH_FAILURES_TOTAL) return [];
  return [
    `ADMIN_AUTH_FAILURES_PER_ADDRESS: must not exceed ADMIN_AUTH_FAILURES_TOTAL (got ${e.ADMIN_AUTH_FAILURES_PER_ADDRESS} > ${e.ADMIN_AUTH_FAILURES_TOTAL})`,
  ];
}

const OIDC_SETTINGS = ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'OIDC_REDIRECT_URL', 'CUSTOMER_SESSION_SECRET'] as const;

/** Loopback hosts, where plain HTTP may be allowed for development (CUSTOMER_PLAIN_HTTP_LOCALHOST). */
function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

function parsedUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** A value with a scheme is a URL (https://, or http:// to a loopback host for tests and development); anything else a file path. */
function secretScanningKeysOf(value: string): SecretScanningKeySource {
  return value.includes('://') ? { kind: 'url', url: value } : { kind: 'file', path: value };
}

function secretScanningKeysProblems(e: ParsedEnv): string[] {
  if (!e.GITHUB_SECRET_SCANNING_KEYS) return [];
  const source = secretScanningKeysOf(e.GITHUB_SECRET_SCANNING_KEYS);
  if (source.kind === 'file') return [];
  const url = parsedUrl(source.url);
  if (url?.protocol === 'https:' || (url?.protocol === 'http:' && isLoopbackHost(url.hostname))) return [];
  // The value itself is not repeated: a URL may carry credentials.
  return [
    `GITHUB_SECRET_SCANNING_KEYS: must be an https:// URL (plain http:// only to a loopback host) or a file path, e.g. https://api.github.com/meta/public_keys/secret_scanning`,
  ];
}

/** Every problem with the OIDC_* and CUSTOMER_SESSION_* settings (none when sign-in is not configured at all). */
function customerSignInProblems(e: ParsedEnv): string[] {
  const problems: string[] = [];
  const plainHttpLocalhost = e.CUSTOMER_PLAIN_HTTP_LOCALHOST === 'true';
  if (!e.OIDC_ISSUER_URL) {
    // A half-done configuration is never silently ignored.
    const stray = OIDC_SETTINGS.filter((name) => e[name] !== undefined);
    if (stray.length > 0) problems.push(`OIDC_ISSUER_URL: required when ${stray.join(', ')} ${stray.length > 1 ? 'are' : 'is'} set`);
    return problems;
  }
  const httpAllowed = (url: URL, name: string) => {
    if (url.protocol === 'https:') return;
    if (url.protocol !== 'http:') problems.push(`${name}: must be an https:// URL, got '${url.protocol}'`);
    else if (!isLoopbackHost(url.hostname))
      problems.push(
        `${name}: must be an https:// URL (plain http:// is allowed only on a loopback host with CUSTOMER_PLAIN_HTTP_LOCALHOST=true)`,
      );
    else if (!plainHttpLocalhost)
      problems.push(`${name}: plain http:// on ${url.hostname} needs CUSTOMER_PLAIN_HTTP_LOCALHOST=true (development only)`);
  };
  const issuer = parsedUrl(e.OIDC_ISSUER_URL);
  if (!issuer) problems.push(`OIDC_ISSUER_URL: not a URL: '${e.OIDC_ISSUER_URL}'`);
  else {
    httpAllowed(issuer, 'OIDC_ISSUER_URL');
    if (issuer.search || issuer.hash) problems.push('OIDC_ISSUER_URL: must not have a query or fragment (it is the issuer identifier)');
  }
  if (!e.OIDC_CLIENT_ID)
    problems.push('OIDC_CLIENT_ID: required with OIDC_ISSUER_URL (the client id the identity provider gave this dashboard)');
  if (!e.OIDC_REDIRECT_URL) {
    problems.push(`OIDC_REDIRECT_URL: required with OIDC_ISSUER_URL (e.g. https://console.example.com${CUSTOMER_CALLBACK_PATH})`);
  } else {
    const redirect = parsedUrl(e.OIDC_REDIRECT_URL);
    if (!redirect) problems.push(`OIDC_REDIRECT_URL: not a URL: '${e.OIDC_REDIRECT_URL}'`);
    else {
      httpAllowed(redirect, 'OIDC_REDIRECT_URL');
      if (redirect.pathname !== CUSTOMER_CALLBACK_PATH || redirect.search || redirect.hash || redirect.username || redirect.password)
        problems.push(
          `OIDC_REDIRECT_URL: must be the dashboard's public origin followed by ${CUSTOMER_CALLBACK_PATH} and nothing else, got '${e.OIDC_REDIRECT_URL}'`,
        );
      if (plainHttpLocalhost && redirect.protocol === 'https:')
        problems.push(
          'CUSTOMER_PLAIN_HTTP_LOCALHOST: only for an http:// redirect URL on a loopback host; an https:// dashboard keeps Secure cookies',
        );
    }
  }
  const scopes = e.OIDC_SCOPES.split(/\s+/).filter(Boolean);
  if (!scopes.includes('openid')) problems.push(`OIDC_SCOPES: must include 'openid' (got '${e.OIDC_SCOPES}')`);
  if (e.OIDC_IDENTITY_CLAIM === 'email' && !scopes.includes('email'))
    problems.push("OIDC_SCOPES: must include 'email' when OIDC_IDENTITY_CLAIM=email");
  if (!e.CUSTOMER_SESSION_SECRET) {
    problems.push('CUSTOMER_SESSION_SECRET: required with OIDC_ISSUER_URL (≥ 32 random characters, the same on every replica)');
  } else if (e.CUSTOMER_SESSION_SECRET.length < 32) {
    problems.push('CUSTOMER_SESSION_SECRET: must be at least 32 characters (use a long random value)');
  }
  if (e.CUSTOMER_SESSION_IDLE_TIMEOUT_MS > e.CUSTOMER_SESSION_MAX_AGE_MS) {
    problems.push(
      `CUSTOMER_SESSION_IDLE_TIMEOUT_MS: must not exceed CUSTOMER_SESSION_MAX_AGE_MS (got ${e.CUSTOMER_SESSION_IDLE_TIMEOUT_MS} > ${e.CUSTOMER_SESSION_MAX_AGE_MS})`,
    );
  }
  return problems;
}

function customerSignInOf(e: ParsedEnv): CustomerSignInSettings {
  const redirectUrl = new URL(e.OIDC_REDIRECT_URL!);
  return {
    issuerUrl: e.OIDC_ISSUER_URL!,
    clientId: e.OIDC_CLIENT_ID!,
    ...(e.OIDC_CLIENT_SECRET ? { clientSecret: e.OIDC_CLIENT_SECRET } : {}),
    redirectUrl: redirectUrl.href,
    publicOrigin: redirectUrl.origin,
    scopes: e.OIDC_SCOPES.split(/\s+/).filter(Boolean),
    identityClaim: e.OIDC_IDENTITY_CLAIM,
    sessionSecret: e.CUSTOMER_SESSION_SECRET!,
    sessionIdleMs: e.CUSTOMER_SESSION_IDLE_TIMEOUT_MS,
    sessionMaxAgeMs: e.CUSTOMER_SESSION_MAX_AGE_MS,
    plainHttpLocalhost: e.CUSTOMER_PLAIN_HTTP_LOCALHOST === 'true',
  };
}

function redisTopologyOf(e: ParsedEnv): RedisTopology | undefined {
  const password = e.REDIS_PASSWORD ? { password: e.REDIS_PASSWORD } : {};
  if (e.REDIS_URL) return { mode: 'standalone', url: e.REDIS_URL };
  if (e.REDIS_SENTINELS) return { mode: 'sentinel', sentinels: e.REDIS_SENTINELS, masterName: e.REDIS_SENTINEL_MASTER!, ...password };
  if (e.REDIS_CLUSTER_NODES) return { mode: 'cluster', nodes: e.REDIS_CLUSTER_NODES, ...password };
  return undefined;
}

function loadConfigFile(
  path: string,
  readFile: (path: string) => string,
): { ok: true; config: ConfigFile } | { ok: false; problems: string[] } {
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    return { ok: false, problems: [`CONFIG_FILE: cannot read ${path}: ${(error as Error).message}`] };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, problems: [`CONFIG_FILE: ${path} is not valid JSON: ${(error as Error).message}`] };
  }
  const parsed = configFileSchema.safeParse(json);
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) => `CONFIG_FILE ${path}: ${issue.path.join('.') || '(root)'}: ${issue.message}`),
    };
  }
  return { ok: true, config: parsed.data };
}

/** Freezes every nested object, including ones whose top level a builder already froze. */
export function deepFreeze<T>(value: T, seen = new WeakSet<object>()): T {
  if (value && typeof value === 'object' && !seen.has(value)) {
    seen.add(value);
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child, seen);
  }
  return value;
}

/** The CLI's own settings: where the admin API is and the token to call it with. */
export interface CliSettings {
  readonly adminUrl: string;
  /** OPERATOR_TOKEN, else the contents of OPERATOR_TOKEN_FILE, else the break-glass ADMIN_TOKEN. */
  readonly adminToken?: string;
}

export function loadCliSettings(
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): CliSettings {
  const port = env.ADMIN_PORT?.trim() || '9192';
  if (!/^\d{1,5}$/.test(port)) throw new Error(`ADMIN_PORT must be a port number, got '${port}'`);
  const adminUrl = env.ADMIN_URL?.trim() || `http://127.0.0.1:${port}`;
  try {
    new URL(adminUrl);
  } catch {
    throw new Error(`ADMIN_URL must be a URL such as http://127.0.0.1:9192, got '${adminUrl}'`);
  }
  const adminToken = cliOperatorToken(env, readFile) ?? env.ADMIN_TOKEN?.trim();
  return Object.freeze(adminToken ? { adminUrl, adminToken } : { adminUrl });
}

/** An operator API token for the CLI: from the environment, or from a file (a mounted secret), never both. */
function cliOperatorToken(env: Readonly<Record<string, string | undefined>>, readFile: (path: string) => string): string | undefined {
  const inline = env.OPERATOR_TOKEN?.trim();
  const file = env.OPERATOR_TOKEN_FILE?.trim();
  if (inline && file) throw new Error('Set OPERATOR_TOKEN or OPERATOR_TOKEN_FILE, not both');
  if (!file) return inline || undefined;
  let text: string;
  try {
    text = readFile(file);
  } catch (error) {
    throw new Error(`OPERATOR_TOKEN_FILE: cannot read '${file}' (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const token = text.trim();
  if (token === '' || /\s/.test(token)) throw new Error(`OPERATOR_TOKEN_FILE: '${file}' must hold one token and nothing else`);
  return token;
}

/**
 * Where `gateway-authz check` sends its Check when no --grpc-url is given:
 * the local service's gRPC port (GRPC_PORT, default 9191) on 127.0.0.1,
 * the way the admin commands default to ADMIN_PORT.
 */
export function loadCheckTarget(env: Readonly<Record<string, string | undefined>>): string {
  const port = env.GRPC_PORT?.trim() || '9191';
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw new Error(`GRPC_PORT must be a port number from 1 to 65535, got '${port}'`);
  }
  return `127.0.0.1:${Number(port)}`;
}
