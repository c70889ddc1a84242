import { startApp, type RunningApp } from '../../src/app';
import type { Clock } from '../../src/platform/clock';
import type { MeteredResponseSink } from '../../src/metering/metered-response';
import type { ResolveHost } from '../../src/webhooks/endpoint-targets';
import { RedisStore } from '../../src/store/redis/redis-store';
import type { AuditEntry, Store } from '../../src/ports/store';
import type {
  ApiAccount,
  ApiAccountList,
  ApiCredit,
  ApiErrorBody,
  ApiKey,
  ApiKeyList,
  ApiMember,
  ApiMemberList,
  ApiRotatedKey,
} from '../../src/cli/api-types';
import { LogCapture } from './log-capture';
import { captureAdminResponses, captureFinalState, registerSecrets } from './secret-scan';
import { settingsFrom } from './pipeline-fixture-world';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

/**
 * An admin answer as the tests read it: the fields of every answer shape the admin API has (error, account,
 * key, created or rotated key, lists, credit, audit page). A test asserts on the fields the answer it expects
 * has; a field the answer lacks is undefined at run time and fails that assertion. (Every admin answer has a JSON body.)
 */
export type AdminBody = ApiErrorBody &
  ApiKey &
  ApiRotatedKey &
  ApiAccount &
  ApiAccountList &
  ApiKeyList &
  ApiCredit &
  AuditPage &
  Omit<ApiMember, 'status'> &
  ApiMemberList;

interface AuditPage {
  entries: AuditEntry[];
  next: string | null;
}

export interface AppUnderTest {
  app: RunningApp;
  logs: LogCapture;
  grpcAddress: string;
  adminUrl: string;
  /** Calls the admin API over real HTTP with the admin token. Every response joins the suite-wide secret scan. */
  admin(method: string, path: string, body?: object, token?: string): Promise<{ status: number; body: AdminBody }>;
  /** admin() with request headers of the test's own, answering the response's headers too. */
  adminWithHeaders(
    method: string,
    path: string,
    body: object | undefined,
    headers: Record<string, string>,
  ): Promise<{ status: number; body: AdminBody; headers: Headers }>;
  /** Records a final /metrics scrape and (with a token) the audit log for the secret scan, then closes the app. */
  close(): Promise<void>;
}

/**
 * The real server (gRPC Check + admin HTTP) on free loopback ports, with its
 * logs captured. Redis-backed when a URL is given.
 */
/** The Redis deadline of apps under test unless a test sets REDIS_TIMEOUT_MS; production's default is 50 ms. */
export const TEST_REDIS_TIMEOUT_MS = '1000';

export async function startAppUnderTest(options: {
  redisUrl?: string;
  env?: Record<string, string>;
  config?: object;
  store?: Store;
  clock?: Clock;
  /** Where the usage processor hands metered answers (default: the app's own). */
  meteredResponses?: MeteredResponseSink;
  /** How webhook hosts resolve (no real DNS in tests). */
  resolveWebhookHost?: ResolveHost;
}): Promise<AppUnderTest> {
  const env: Record<string, string> = {
    GRPC_PORT: '0',
    ADMIN_PORT: '0',
    CUSTOMER_PORT: '0',
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    // Production's 50 ms Redis deadline turns a loaded test machine's pauses into
    // store_unavailable answers; tests of the deadline itself set it.
    ...(options.redisUrl ? { REDIS_URL: options.redisUrl, REDIS_TIMEOUT_MS: TEST_REDIS_TIMEOUT_MS } : {}),
    ...(options.config ? { CONFIG_FILE: 'config.json' } : {}),
    ...options.env,
  };
  registerSecrets(TEST_ADMIN_TOKEN);
  const settings = settingsFrom(env, options.config ? { 'config.json': JSON.stringify(options.config) } : {});
  const logs = new LogCapture();
  const app = await startApp(settings, {
    logger: logs.logger,
    ...(options.store ? { store: options.store } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.meteredResponses ? { meteredResponses: options.meteredResponses } : {}),
    ...(options.resolveWebhookHost ? { resolveWebhookHost: options.resolveWebhookHost } : {}),
  });
  const adminUrl = `http://127.0.0.1:${app.adminPort}`;
  // Every admin response this test file fetches (helpers or plain fetch) is recorded.
  captureAdminResponses(adminUrl);
  return {
    app,
    logs,
    grpcAddress: `127.0.0.1:${app.grpcPort}`,
    adminUrl,
    async admin(method, path, body, token = TEST_ADMIN_TOKEN) {
      const { status, body: parsed } = await callAdmin(adminUrl, method, path, body, token, {});
      return { status, body: parsed };
    },
    adminWithHeaders(method, path, body, headers) {
      return callAdmin(adminUrl, method, path, body, TEST_ADMIN_TOKEN, headers);
    },
    async close() {
      await captureFinalState(adminUrl, env.ADMIN_TOKEN || undefined);
      await app.close();
    },
  };
}

async function callAdmin(
  adminUrl: string,
  method: string,
  path: string,
  body: object | undefined,
  token: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: AdminBody; headers: Headers }> {
  const response = await fetch(`${adminUrl}${path}`, {
    method,
    headers: {
      ...headers,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  const parsed = (text ? JSON.parse(text) : undefined) as AdminBody;
  if (typeof parsed?.key === 'string') registerSecrets(parsed.key);
  return { status: response.status, body: parsed, headers: response.headers };
}

export { RedisStore };

/** The ids of an account's keys, sorted, as the admin API lists them. */
export async function keyIdsOf(app: AppUnderTest, accountId: string): Promise<string[]> {
  const listed = await app.admin('GET', `/admin/accounts/${accountId}/keys`);
  expect(listed.status).toBe(200);
  return listed.body.keys.map((key) => key.id).sort();
}
