import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBase62 } from '../../src/keys/base62';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { registerSecrets } from './secret-scan';

/**
 * Envoy-shaped CheckRequest fixtures (test/fixtures/check-requests/*.json),
 * in the style of opa-envoy-plugin: each names the behaviour, carries the
 * request as Envoy sends it and the expected decision. Secrets appear only
 * as {{PLACEHOLDERS}}, filled at run time, so no key-shaped string is
 * committed.
 */
export interface FixtureExpectation {
  result: 'allow' | 'deny';
  http_status: number;
  family: string;
  style: 'chat' | 'messages' | 'generative' | 'generic';
  reason?: string;
}

export interface CheckRequestFixture {
  file: string;
  name: string;
  check_request: object;
  expect: FixtureExpectation;
}

export const FIXTURE_DIR = join(__dirname, '..', 'fixtures', 'check-requests');

export function loadCheckRequestFixtures(): CheckRequestFixture[] {
  return readdirSync(FIXTURE_DIR)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => ({ file, ...(JSON.parse(readFileSync(join(FIXTURE_DIR, file), 'utf8')) as Omit<CheckRequestFixture, 'file'>) }));
}

/** A type alias, not an interface, so that Object.values() of it is string[]. */
export type FixtureSecrets = {
  LIVE_KEY: string;
  OTHER_LIVE_KEY: string;
  REVOKED_KEY: string;
  UNKNOWN_KEY: string;
  BAD_CHECKSUM_KEY: string;
  TRUNCATED_KEY: string;
  OPENAI_KEY: string;
  ANTHROPIC_KEY: string;
  GOOGLE_KEY: string;
  OPENROUTER_KEY: string;
};

function hex(length: number): string {
  return Array.from({ length }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
}

/** Customer keys come from the caller (admin API or store); the rest is made up here. */
export function makeFixtureSecrets(keys: { live: string; otherLive: string; revoked: string }): FixtureSecrets {
  const live = keys.live;
  const lastChar = live.at(-1) === 'A' ? 'B' : 'A';
  const secrets: FixtureSecrets = {
    LIVE_KEY: live,
    OTHER_LIVE_KEY: keys.otherLive,
    REVOKED_KEY: keys.revoked,
    UNKNOWN_KEY: generateCustomerKey('live'),
    BAD_CHECKSUM_KEY: live.slice(0, -1) + lastChar,
    TRUNCATED_KEY: live.slice(0, -3),
    // Provider-shaped fakes, built at run time.
    OPENAI_KEY: `sk-proj-${randomBase62(40)}T3BlbkFJ${randomBase62(40)}`,
    ANTHROPIC_KEY: `sk-ant-api03-${randomBase62(93)}AA`,
    GOOGLE_KEY: `AIza${randomBase62(35)}`,
    OPENROUTER_KEY: `sk-or-v1-${hex(64)}`,
  };
  registerSecrets(...Object.values(secrets));
  return secrets;
}

/** Deep-copies a fixture request with every {{NAME}} replaced by its secret. */
export function materialize<T>(value: T, secrets: FixtureSecrets): T {
  return JSON.parse(
    JSON.stringify(value).replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => {
      const secret = secrets[name as keyof FixtureSecrets];
      if (secret === undefined) throw new Error(`fixture uses unknown placeholder {{${name}}}`);
      return secret;
    }),
  ) as T;
}
