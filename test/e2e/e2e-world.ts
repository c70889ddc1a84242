/**
 * The whole stack for one e2e test file:
 *
 *   client (SDK / raw HTTP) ──▶ EnvoyFront ──gRPC Check──▶ gateway-authz ──▶ real Redis
 *                                   ├──▶ FakeUpstream (records what it received and answered)
 *                                   └──ext_proc (option)──▶ a processor stub that records, or gateway-authz
 *
 * Start it in beforeAll and close it in afterAll.
 */
import { startEnvoyFront, type EnvoyFront } from './envoy-front';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from './fake-upstream';
import { startExtProcRecorder, type ExtProcRecorder } from '../support/ext-proc-recorder';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';

export interface E2EWorld {
  redis: TestRedis;
  gateway: AppUnderTest;
  upstream: FakeUpstream;
  front: EnvoyFront;
  /** The processor stub behind the front's ext_proc filter, with `extProc: 'recorder'`. */
  processor?: ExtProcRecorder;
  /** Base URL of the front (http://127.0.0.1:PORT). */
  url: string;
  /** Creates an account (if new) with optional PATCH body (billing/limits) and a key; returns the full key and ids. Registers the key with registerSecrets. */
  newKey(
    accountId: string,
    options?: { accountPatch?: object; keyLimits?: { limit: number; window: string }[]; name?: string },
  ): Promise<{ key: string; keyId: string; accountId: string }>;
  revoke(keyId: string): Promise<void>;
  close(): Promise<void>;
}

export interface E2EWorldOptions {
  /** Merged over DEFAULT_E2E_CONFIG (the gateway's CONFIG_FILE). */
  config?: object;
  /** Extra gateway environment, over DEFAULT_E2E_ENV. */
  env?: Record<string, string>;
  /** The front's ext_authz deadline (default E2E_FRONT_TIMEOUT_MS). */
  frontTimeoutMs?: number;
  /**
   * Runs envoy.yaml's ext_proc filter (usage metering) in the front, against a processor stub that records
   * every side stream ('recorder'), or against gateway-authz's gRPC port as envoy.yaml does ('gateway').
   * Default: off.
   */
  extProc?: 'recorder' | 'gateway';
  upstream?: FakeUpstreamOptions;
}

/** Anthropic SDK 1.x sends `anthropic-version: 2026-10-21`; the 0.x line sends 2023-06-01. */
export const DEFAULT_E2E_CONFIG = { messagesVersions: ['2023-06-01', '2026-10-21'] };

/**
 * REDIS_TIMEOUT_MS: production uses 50 ms, far below Envoy's 250 ms deadline.
 * On a loaded 2-core test machine (two jest workers, ts-jest compiling, a
 * spawned redis-server) a single Redis reply can occasionally take longer
 * than 50 ms, which would turn an e2e SDK test into a spurious 503
 * store_unavailable. E2E tests are about the SDKs' view of the answers, not
 * latency, so the gateway gets 1 s (the maximum it accepts); the 50 ms path
 * is covered by test/integration/store-failure.test.ts.
 */
export const DEFAULT_E2E_ENV: Record<string, string> = { REDIS_TIMEOUT_MS: '1000' };

/**
 * The front's ext_authz deadline in the world. envoy.yaml says 250 ms (the
 * front's own default, pinned in envoy-front.test.ts); here it must stay
 * above REDIS_TIMEOUT_MS so that, as in production, the gateway always
 * answers before the proxy gives up, and a slow machine cannot turn a Check
 * into a 503 from the proxy.
 */
export const E2E_FRONT_TIMEOUT_MS = 2000;

export async function startE2EWorld(options: E2EWorldOptions = {}): Promise<E2EWorld> {
  const started: { close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    for (const part of started.reverse()) await part.close().catch(() => undefined);
    started.length = 0;
  };
  try {
    const redis = await startTestRedis();
    started.push({ close: () => redis.stop() });
    const gateway = await startAppUnderTest({
      redisUrl: redis.url,
      config: { ...DEFAULT_E2E_CONFIG, ...(options.config ?? {}) },
      env: { ...DEFAULT_E2E_ENV, ...(options.env ?? {}) },
    });
    started.push(gateway);
    const upstream = await startFakeUpstream(options.upstream);
    started.push(upstream);
    const processor = options.extProc === 'recorder' ? await startExtProcRecorder() : undefined;
    if (processor) started.push(processor);
    const processorAddress = processor?.address ?? (options.extProc === 'gateway' ? gateway.grpcAddress : undefined);
    const front = await startEnvoyFront({
      authzAddress: gateway.grpcAddress,
      upstreamUrl: upstream.url,
      timeoutMs: options.frontTimeoutMs ?? E2E_FRONT_TIMEOUT_MS,
      ...(processorAddress ? { extProc: { address: processorAddress } } : {}),
    });
    started.push(front);

    const accounts = new Set<string>();
    let keyCount = 0;

    async function ensureAccount(accountId: string): Promise<void> {
      if (accounts.has(accountId)) return;
      const created = await gateway.admin('POST', '/admin/accounts', { id: accountId, name: `Account ${accountId}` });
      if (created.status !== 201 && created.body?.error?.code !== 'account_exists') {
        throw new Error(`creating account ${accountId}: ${created.status} ${JSON.stringify(created.body)}`);
      }
      accounts.add(accountId);
    }

    return {
      redis,
      gateway,
      upstream,
      front,
      ...(processor ? { processor } : {}),
      url: front.url,
      async newKey(accountId, keyOptions = {}) {
        await ensureAccount(accountId);
        if (keyOptions.accountPatch !== undefined) {
          const patched = await gateway.admin('PATCH', `/admin/accounts/${encodeURIComponent(accountId)}`, keyOptions.accountPatch);
          if (patched.status !== 200) throw new Error(`patching account ${accountId}: ${patched.status} ${JSON.stringify(patched.body)}`);
        }
        keyCount += 1;
        const created = await gateway.admin('POST', `/admin/accounts/${encodeURIComponent(accountId)}/keys`, {
          name: keyOptions.name ?? `e2e key ${keyCount}`,
          ...(keyOptions.keyLimits !== undefined ? { limits: keyOptions.keyLimits } : {}),
        });
        if (created.status !== 201 || typeof created.body?.key !== 'string') {
          throw new Error(`creating a key for ${accountId}: ${created.status} ${JSON.stringify(created.body)}`);
        }
        registerSecrets(created.body.key);
        return { key: created.body.key, keyId: created.body.id, accountId };
      },
      async revoke(keyId) {
        const revoked = await gateway.admin('POST', `/admin/keys/${encodeURIComponent(keyId)}/revoke`);
        if (revoked.status !== 200) throw new Error(`revoking ${keyId}: ${revoked.status} ${JSON.stringify(revoked.body)}`);
      },
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
