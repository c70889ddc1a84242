import { ManualClock } from '../../src/platform/clock';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import type { PipelineDeps } from '../../src/check/pipeline/decide';
import { loadSettings, type Settings } from '../../src/platform/settings';
import { MemoryStore } from '../../src/store/memory-store';
import type { AdminStore } from '../../src/ports/store';
import type { KeyIds, StoredKey } from '../../src/keys/key-records';
import type { KeyIndex } from '../../src/check/ports';
import { makeFixtureSecrets, type FixtureSecrets } from './check-request-fixtures';

export const FIXTURE_ACCOUNT = 'acct_fixture';
export const FIXTURE_NOW = Date.parse('2026-11-22T12:00:00Z');

/** Stores a key record directly (the admin API only creates active keys). */
export async function insertKey(store: AdminStore, key: string, overrides: Partial<StoredKey> = {}): Promise<StoredKey> {
  const record: StoredKey = {
    id: `key_${hashCustomerKey(key).slice(0, 12)}`,
    accountId: FIXTURE_ACCOUNT,
    prefix: displayPrefixOf(key),
    name: 'fixture key',
    environment: key.startsWith('gk_test_') ? 'test' : 'live',
    status: 'active',
    createdAt: new Date(FIXTURE_NOW - 86_400_000).toISOString(),
    ...overrides,
  };
  const result = await store.insertKey(hashCustomerKey(key), record);
  if (result !== 'created') throw new Error(`could not seed key: ${JSON.stringify(result)}`);
  return record;
}

/** Counts lookups so tests can prove offline denials never reach the store. */
export class CountingLookup implements KeyIndex {
  lookups = 0;
  constructor(private readonly inner: KeyIndex) {}
  resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    this.lookups += 1;
    return this.inner.resolveKeyHash(keyHash);
  }
}

export interface FixtureWorld {
  settings: Settings;
  store: MemoryStore;
  lookup: CountingLookup;
  clock: ManualClock;
  secrets: FixtureSecrets;
  deps: PipelineDeps;
}

export function settingsFrom(env: Record<string, string>, files: Record<string, string> = {}): Settings {
  const result = loadSettings(env, (path) => {
    const text = files[path];
    if (text === undefined) throw new Error(`no such file ${path}`);
    return text;
  });
  if (!result.ok) throw new Error(`bad test settings: ${result.problems.join('; ')}`);
  return result.settings;
}

/** A MemoryStore seeded with the fixture account and keys, and a manual clock. */
export async function fixtureWorld(config?: object): Promise<FixtureWorld> {
  const settings = config ? settingsFrom({ CONFIG_FILE: 'config.json' }, { 'config.json': JSON.stringify(config) }) : settingsFrom({});
  const clock = new ManualClock(FIXTURE_NOW);
  const store = new MemoryStore(clock);
  await store.createAccount({ id: FIXTURE_ACCOUNT, name: 'Fixture Inc', status: 'active', createdAt: new Date(FIXTURE_NOW).toISOString() });
  const live = generateCustomerKey('live');
  const otherLive = generateCustomerKey('live');
  const revoked = generateCustomerKey('live');
  await insertKey(store, live);
  await insertKey(store, otherLive);
  await insertKey(store, revoked, { status: 'revoked' });
  const lookup = new CountingLookup(store);
  return {
    settings,
    store,
    lookup,
    clock,
    secrets: makeFixtureSecrets({ live, otherLive, revoked }),
    deps: { settings: settings.pipeline, keyIndex: lookup, authorizer: store },
  };
}
