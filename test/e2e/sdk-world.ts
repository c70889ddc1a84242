/**
 * What the three SDK suites (sdk-openai, sdk-anthropic, sdk-gemini) share: the world they run in, the credential
 * headers that must never reach the upstream, and the authentication failures every style must report.
 */
import { generateCustomerKey } from '../../src/keys/customer-key';
import { startE2EWorld, type E2EWorld } from './e2e-world';

/** Every header a customer key may come in; none of them may reach the upstream. */
export const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'x-vendorg-api-key'];

/** How long a test that waits out an SDK's own retries may take. */
export const RETRY_TIMEOUT_MS = 60_000;

/** The environment variables any of the SDKs reads (base URL, key, organisation, custom headers, …). */
const SDK_ENV = /^(OPENAI|ANTHROPIC|GOOGLE|GEMINI)_/;

/**
 * The e2e world for an SDK suite: envoy.yaml's ext_proc filter in the front (every answer must reach the processor,
 * unchanged for the SDK), an upstream that reports usage with cache reads and writes, and none of the SDKs'
 * environment variables set while it runs, so nothing here depends on them; close() puts them back.
 */
export async function startSdkWorld(config?: object): Promise<E2EWorld> {
  const saved: Record<string, string | undefined> = {};
  for (const name of Object.keys(process.env).filter((n) => SDK_ENV.test(n))) {
    saved[name] = process.env[name];
    delete process.env[name];
  }
  const world = await startE2EWorld({
    ...(config === undefined ? {} : { config }),
    extProc: 'recorder',
    upstream: { usage: { inputTokens: 23, outputTokens: 9, cachedInputTokens: 5, cacheCreationTokens: 3 } },
  });
  const closeWorld = world.close.bind(world);
  world.close = async () => {
    await closeWorld();
    Object.assign(process.env, saved);
  };
  return world;
}

/** An authentication failure an SDK must report as its style's 401, with the deny reason and a text to find. */
export interface AuthenticationFailureCase {
  name: string;
  code: string;
  text: string;
  key: () => Promise<string>;
}

/**
 * The authentication failures of every style: an unknown well-formed key, a revoked key (made by `revokedKey`), and
 * the provider's own key sent to the gateway (`providerKey`, whose refusal names the provider as `providerText`).
 */
export function authenticationFailureCases(
  revokedKey: () => Promise<string>,
  provider: { name: string; text: string; key: string },
): AuthenticationFailureCase[] {
  return [
    { name: 'unknown (well-formed) key', code: 'unknown_key', text: 'Invalid API key', key: async () => generateCustomerKey('live') },
    { name: 'revoked key', code: 'key_revoked', text: 'has been revoked', key: revokedKey },
    { name: provider.name, code: 'upstream_key_not_accepted', text: provider.text, key: async () => provider.key },
  ];
}
