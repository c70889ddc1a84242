import Fastify, { type FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../../src/platform/clock';
import type { CustomerIdentity } from '../../src/accounts/customer-identity';
import { DEFAULT_MAX_ACTIVE_KEYS } from '../../src/keys/active-key-cap';
import { registerCustomerApi } from '../../src/customer/customer-api';
import { declareCustomerIdentity } from '../../src/customer/customer-request';
import { DEFAULT_PLAN } from '../../src/platform/settings';
import type { Store } from '../../src/ports/store';
import type { MemberView } from '../../src/http/api-views';
import type { AccountSummaryView, CustomerAuditEntryView, CustomerKeyView, MeView } from '../../src/customer/customer-views';
import { LogCapture } from './log-capture';
import { captureAdminResponses, registerSecrets } from './secret-scan';

/** The test-only header this harness reads the signed-in person from (JSON); the real customer server uses its session instead. */
export const TEST_IDENTITY_HEADER = 'x-test-customer-identity';

/**
 * A customer API answer as the tests read it: the fields of every answer shape (error, me, summary, key,
 * created key, lists, member, audit page), as AdminBody does for the admin API. A test asserts on the
 * fields the answer it expects has; one the answer lacks is undefined at run time and fails that assertion.
 */
export type CustomerBody = { error: { code: string; message: string; field?: string } } & MeView &
  Omit<AccountSummaryView, 'keys' | 'name' | 'status'> &
  Omit<CustomerKeyView, 'status'> &
  Omit<MemberView, 'status'> & {
    status: string;
    key: string;
    oldKey: CustomerKeyView;
    keys: CustomerKeyView[] & AccountSummaryView['keys'];
    members: MemberView[];
    entries: CustomerAuditEntryView[];
    next: string | null;
  };

export interface CustomerApiUnderTest {
  url: string;
  /** Every route registered, as `METHOD /path`. */
  routes: string[];
  logs: LogCapture;
  /** Calls the customer API over real HTTP as `identity` (undefined: signed out). Responses join the suite-wide secret scan. */
  call(
    identity: CustomerIdentity | undefined,
    method: string,
    path: string,
    body?: object,
  ): Promise<{ status: number; body: CustomerBody }>;
  close(): Promise<void>;
}

/**
 * The customer API plugin on a real Fastify listener, as the customer
 * server mounts it, with one difference: instead of the OpenID Connect
 * session, a test hook sets `request.customerIdentity` from a header. That
 * hook exists only here, in test/support.
 */
export async function startCustomerApiUnderTest(options: {
  store: Store;
  clock?: Clock;
  defaultMaxActiveKeys?: number;
}): Promise<CustomerApiUnderTest> {
  const logs = new LogCapture();
  const app: FastifyInstance = Fastify({ logger: false });
  declareCustomerIdentity(app);
  const routes: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push(`${method} ${route.url}`);
  });
  app.addHook('onRequest', async (request) => {
    const header = request.headers[TEST_IDENTITY_HEADER];
    request.customerIdentity = typeof header === 'string' ? (JSON.parse(header) as CustomerIdentity) : undefined;
  });
  registerCustomerApi(app, {
    store: options.store,
    clock: options.clock ?? systemClock,
    logger: logs.logger,
    defaultPlan: DEFAULT_PLAN,
    defaultMaxActiveKeys: options.defaultMaxActiveKeys ?? DEFAULT_MAX_ACTIVE_KEYS,
    countsFlushIntervalMs: 30_000,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  captureAdminResponses(url);
  return {
    url,
    routes,
    logs,
    async call(identity, method, path, body) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          ...(identity ? { [TEST_IDENTITY_HEADER]: JSON.stringify(identity) } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await response.text();
      const parsed = (text ? JSON.parse(text) : undefined) as CustomerBody;
      if (typeof parsed?.key === 'string') registerSecrets(parsed.key);
      return { status: response.status, body: parsed };
    },
    async close() {
      await app.close();
    },
  };
}
