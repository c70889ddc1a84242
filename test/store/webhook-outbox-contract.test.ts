import { ManualClock } from '../../src/platform/clock';
import { MemoryStore } from '../../src/store/memory-store';
import { RedisStore } from '../../src/store/redis/redis-store';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { OPERATOR } from '../../src/accounts/customer-identity';
import type { Account, StoredKey } from '../../src/keys/key-records';
import type { Member } from '../../src/accounts/members';
import type { Store } from '../../src/ports/store';
import { messagesUsageRecord } from '../support/usage-records';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import { budgetReachedEvent, creditEvent, tokenBudgetReachedEvent } from '../../src/webhooks/webhook-events';
import type { OutboxEvent, WebhookDelivery } from '../../src/ports/webhook-store';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * The webhook outbox as every store keeps it (src/ports/webhook-store.ts):
 * a change's events are appended in the change's own step, once, and only
 * when the change is made; deliveries fan out to subscribed endpoints, are
 * leased, retried, given up, and disable an endpoint after failures in a row.
 */
const T0 = Date.parse('2026-11-29T10:00:00Z');
const LEASE_MS = 30_000;
let redis: TestRedis;
let cluster: TestRedisCluster;
const opened: Store[] = [];
beforeAll(async () => {
  [redis, cluster] = await Promise.all([startTestRedis(), startTestRedisCluster()]);
});
afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  await Promise.all([redis?.stop(), cluster?.stop()]);
});

const implementations: [string, (clock: ManualClock) => Promise<Store>][] = [
  ['memory', async (clock) => new MemoryStore(clock)],
  [
    'redis',
    async (clock) => {
      const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockOverride: () => clock.now() });
      opened.push(store);
      return store;
    },
  ],
  [
    'redis-cluster',
    async (clock) => {
      const nodes = cluster.nodes.split(',').map((node) => ({ host: node.split(':')[0]!, port: Number(node.split(':')[1]) }));
      const store = await RedisStore.connect({
        topology: { mode: 'cluster', nodes },
        commandTimeoutMs: 1000,
        clockOverride: () => clock.now(),
      });
      opened.push(store);
      return store;
    },
  ],
];

let counter = 0;
const unique = (base: string) => `${base}-${process.pid}-${(counter += 1)}`;
const event = (type: string, endpointId?: string): OutboxEvent => ({
  id: unique('msg'),
  type,
  payload: JSON.stringify({ type, n: counter }),
  ...(endpointId ? { endpointId } : {}),
});
const account = (id: string, extra: Partial<Account> = {}): Account => ({
  id,
  name: id,
  status: 'active',
  createdAt: '2026-11-29T00:00:00.000Z',
  ...extra,
});
const keyOf = (accountId: string): { hash: string; record: StoredKey } => {
  const key = generateCustomerKey('live');
  return {
    hash: hashCustomerKey(key),
    record: {
      id: unique('key'),
      accountId,
      prefix: key.slice(0, 12),
      name: 'k',
      environment: 'live',
      status: 'active',
      createdAt: '2026-11-29T00:00:00.000Z',
    },
  };
};
const member = (accountId: string, role: Member['role'] = 'viewer'): Member => ({
  id: unique('mem'),
  accountId,
  role,
  principal: { kind: 'identity', issuer: 'https://login.example.com', subject: unique('s') },
  addedAt: '2026-11-29T00:00:00.000Z',
  addedBy: OPERATOR,
});

describe.each(implementations)('webhook outbox: %s', (_name, open) => {
  let store: Store;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = new ManualClock(T0);
    store = await open(clock);
  });

  async function accountWithEndpoint(events: string[], extra: Partial<Account> = {}) {
    const accountId = unique('acct');
    await store.createAccount(account(accountId, extra));
    const endpointId = unique('whe').replace(/-/g, '');
    const config = {
      id: endpointId,
      accountId,
      url: 'https://93.184.216.34/',
      events,
      secret: 'whsec_c2VjcmV0',
      createdAt: new Date(T0).toISOString(),
    };
    expect(await store.webhooks.createEndpoint(config, 10)).toBe('created');
    return { accountId, endpointId };
  }
  const claim = async (accountId: string) => {
    const claimed = await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 100);
    return claimed === 'idle' ? claimed : claimed.map((delivery) => delivery.eventId).sort();
  };

  it("appends each change's events once, in the change's step: a repeated or refused change appends nothing", async () => {
    const { accountId } = await accountWithEndpoint(['key.created', 'key.rotated', 'key.revoked', 'member.added', 'member.removed']);
    const sent: string[] = [];
    const withEvent = (type: string) => {
      const e = event(type);
      sent.push(e.id);
      return [e];
    };
    const first = keyOf(accountId);
    expect(await store.insertKey(first.hash, first.record, withEvent('key.created'))).toBe('created');
    expect(await store.insertKey(first.hash, first.record, [event('key.created')])).toBe('created'); // a repeat
    const second = keyOf(accountId);
    const rotation = { oldKeyId: first.record.id, newKeyHash: second.hash, newKey: second.record, graceSeconds: 60 };
    expect((await store.rotateKey({ ...rotation, events: withEvent('key.rotated') })).kind).toBe('rotated');
    expect((await store.rotateKey({ ...rotation, events: [event('key.rotated')] })).kind).toBe('rotated'); // a repeat
    expect(await store.revokeKey(second.record.id, clock.now(), withEvent('key.revoked'))).not.toBeNull();
    expect(await store.revokeKey(second.record.id, clock.now(), [event('key.revoked')])).not.toBeNull(); // revoked already
    const owner = member(accountId, 'owner');
    expect((await store.addMember(owner, [event('member.added')])).kind).toBe('added');
    const viewer = member(accountId);
    expect((await store.addMember(viewer, withEvent('member.added'))).kind).toBe('added');
    expect((await store.addMember(viewer, [event('member.added')])).kind).toBe('added'); // a repeat
    expect((await store.removeMember(accountId, viewer.id, withEvent('member.removed'))).kind).toBe('changed');
    expect((await store.removeMember(accountId, owner.id, [event('member.removed')])).kind).toBe('last_owner'); // refused
    expect((await store.removeMember(accountId, viewer.id, [event('member.removed')])).kind).toBe('member_not_found');

    // Each made change's events, once (the first owner's member.added among them).
    const claimed = await claim(accountId);
    expect(claimed).toHaveLength(sent.length + 1);
    expect(claimed).toEqual(expect.arrayContaining(sent));
  });

  it('appends nothing for a key the active-key cap refuses', async () => {
    const { accountId } = await accountWithEndpoint(['key.created'], { maxActiveKeys: 0 });
    const refused = keyOf(accountId);
    expect(await store.insertKey(refused.hash, refused.record, [event('key.created')])).toMatchObject({ kind: 'active_key_cap_reached' });
    expect(await claim(accountId)).toBe('idle');
  });

  it('fans out to subscribed, enabled endpoints (a test-send to its endpoint only), and leases what it hands out', async () => {
    const { accountId, endpointId } = await accountWithEndpoint(['key.revoked']);
    const other = {
      id: 'whe_other',
      accountId,
      url: 'https://93.184.216.34/b',
      events: ['key.created'],
      secret: 'whsec_c2VjcmV0',
      createdAt: new Date(T0).toISOString(),
    };
    await store.webhooks.createEndpoint(other, 10);
    const revoked = event('key.revoked');
    const test = event('webhook.test', 'whe_other');
    await store.webhooks.appendEvents(accountId, [revoked, test, event('member.added')]);
    const claimed = (await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 100)) as WebhookDelivery[];
    expect(claimed.map((d) => [d.eventId, d.endpoint.id]).sort()).toEqual(
      [
        [revoked.id, endpointId],
        [test.id, 'whe_other'],
      ].sort(),
    );
    expect(claimed.find((d) => d.eventId === revoked.id)).toMatchObject({
      payload: revoked.payload,
      attempts: 0,
      eventType: 'key.revoked',
    });
    // Leased: not handed out again until the lease ends, and the account is not idle meanwhile.
    expect(await claim(accountId)).toEqual([]);
    clock.advance(LEASE_MS);
    expect(await claim(accountId)).toEqual([revoked.id, test.id].sort());
  });

  it('retries when due, gives up, and disables an endpoint after failures in a row with its event to the others', async () => {
    const { accountId, endpointId } = await accountWithEndpoint(['key.created']);
    const watcher = {
      id: 'whe_watcher',
      accountId,
      url: 'https://93.184.216.34/w',
      events: ['endpoint.disabled'],
      secret: 'whsec_c2VjcmV0',
      createdAt: new Date(T0).toISOString(),
    };
    await store.webhooks.createEndpoint(watcher, 10);
    const created = event('key.created');
    await store.webhooks.appendEvents(accountId, [created]);
    const disabled = event('endpoint.disabled');
    const settle = async (delivery: WebhookDelivery, settlement: Parameters<Store['webhooks']['settleDelivery']>[0]['settlement']) =>
      store.webhooks.settleDelivery({
        delivery,
        settlement,
        attempt: {
          eventId: delivery.eventId,
          eventType: delivery.eventType,
          attempt: delivery.attempts + 1,
          at: new Date(clock.now()).toISOString(),
          outcome: 'failed',
          status: 500,
          durationMs: 1,
        },
        disableAfterFailures: 3,
        disabledReason: 'failed 3 times',
        disabledEvent: disabled,
      });
    let [delivery] = (await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 10)) as WebhookDelivery[];
    expect(await settle(delivery!, { kind: 'retry', atMs: clock.now() + 1000 })).toEqual({ endpointDisabled: false });
    expect(await claim(accountId)).toEqual([]); // not due yet
    clock.advance(1000);
    [delivery] = (await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 10)) as WebhookDelivery[];
    expect(delivery).toMatchObject({ eventId: created.id, attempts: 1 });
    expect(delivery!.endpoint).toMatchObject({ enabled: true, consecutiveFailures: 1 });
    expect(await settle(delivery!, { kind: 'given_up' })).toEqual({ endpointDisabled: false });
    expect(await store.webhooks.readDeliveryLog(accountId, endpointId, 10)).toHaveLength(2);

    const next = event('key.created');
    await store.webhooks.appendEvents(accountId, [next]);
    [delivery] = (await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 10)) as WebhookDelivery[];
    expect(await settle(delivery!, { kind: 'retry', atMs: clock.now() })).toEqual({ endpointDisabled: true });
    expect(await store.webhooks.getEndpoint(accountId, endpointId)).toMatchObject({
      enabled: false,
      disabledReason: 'failed 3 times',
      consecutiveFailures: 3,
    });
    // The disabling attempt is not retried; the watcher gets the notice.
    const after = (await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 10)) as WebhookDelivery[];
    expect(after.map((d) => [d.eventId, d.endpoint.id])).toEqual([[disabled.id, 'whe_watcher']]);
    // Enabled again: its failures are forgotten.
    expect(await store.webhooks.updateEndpoint(accountId, endpointId, { enabled: true })).toMatchObject({
      enabled: true,
      consecutiveFailures: 0,
    });
  });

  it('appends credit.low as a prepaid balance falls below the threshold and credit.exhausted as it reaches zero, in the usage step, once per record', async () => {
    const { accountId } = await accountWithEndpoint(['credit.low', 'credit.exhausted'], { creditBalance: 1000 });
    await store.webhooks.setCreditLowThreshold(accountId, 500);
    expect(await store.webhooks.getCreditLowThreshold(accountId)).toBe(500);
    const usage = (requestId: string, costMinorUnits: number) =>
      messagesUsageRecord({ requestId, accountId, keyId: 'key_r', costMinorUnits, atMs: clock.now() });
    const payloads = async () => {
      const claimed = await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 100);
      return claimed === 'idle' ? [] : claimed.map((d) => ({ id: d.eventId, payload: d.payload }));
    };
    expect((await store.applyUsage(usage('r1', 400), NO_TOKEN_BUDGETS)).kind).toBe('applied'); // 1000 → 600: above
    expect(await payloads()).toEqual([]);
    expect((await store.applyUsage(usage('r2', 200), NO_TOKEN_BUDGETS)).kind).toBe('applied'); // 600 → 400: below 500
    expect((await store.applyUsage(usage('r2', 200), NO_TOKEN_BUDGETS)).kind).toBe('duplicate'); // the same record again
    const low = creditEvent('credit.low', accountId, 'r2', clock.now(), 400, 500);
    expect(await payloads()).toEqual([{ id: low.id, payload: low.payload }]);
    expect((await store.applyUsage(usage('r3', 100), NO_TOKEN_BUDGETS)).kind).toBe('applied'); // 400 → 300: below already
    expect((await store.applyUsage(usage('r4', 500), NO_TOKEN_BUDGETS)).kind).toBe('applied'); // 300 → -200: exhausted
    // (credit.low's delivery is still leased: only the new one is handed out.)
    const exhausted = creditEvent('credit.exhausted', accountId, 'r4', clock.now(), -200);
    expect(await payloads()).toEqual([{ id: exhausted.id, payload: exhausted.payload }]);
  });

  it("appends budget.reached as a record takes the key's or the account's month spend to its cap, once", async () => {
    const { accountId } = await accountWithEndpoint(['budget.reached'], { monthlySpendCap: 1000 });
    const capped = keyOf(accountId);
    await store.insertKey(capped.hash, { ...capped.record, monthlySpendCap: 300 });
    const usage = (requestId: string, costMinorUnits: number) =>
      messagesUsageRecord({
        requestId,
        accountId,
        keyId: capped.record.id,
        keyPrefix: capped.record.prefix,
        costMinorUnits,
        atMs: clock.now(),
      });
    const payloads = async () => {
      const claimed = await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 100);
      return claimed === 'idle' ? [] : claimed.map((d) => ({ id: d.eventId, payload: d.payload })).sort((a, b) => a.id.localeCompare(b.id));
    };
    await store.applyUsage(usage('b1', 200), NO_TOKEN_BUDGETS); // key 200 of 300, account 200 of 1000
    expect(await payloads()).toEqual([]);
    await store.applyUsage(usage('b2', 200), NO_TOKEN_BUDGETS); // key 400: reached
    await store.applyUsage(usage('b2', 200), NO_TOKEN_BUDGETS); // the same record again
    const key = budgetReachedEvent(accountId, 'b2', clock.now(), { kind: 'key', keyId: capped.record.id }, 300, 400);
    expect(await payloads()).toEqual([{ id: key.id, payload: key.payload }]);
    await store.applyUsage(usage('b3', 700), NO_TOKEN_BUDGETS); // account 1100: reached; the key's was already
    const account = budgetReachedEvent(accountId, 'b3', clock.now(), { kind: 'account' }, 1000, 1100);
    expect(await payloads()).toEqual([{ id: account.id, payload: account.payload }]);
  });

  it("appends budget.reached as a record exhausts the key's or the account's token budget, once, and again a window later", async () => {
    const { accountId, endpointId } = await accountWithEndpoint(['budget.reached']);
    const budgeted = keyOf(accountId);
    const keyBudget = { tokens: 100, windowSeconds: 60 };
    await store.insertKey(budgeted.hash, { ...budgeted.record, tokenBudgets: [keyBudget] });
    const accountBudget = { tokens: 200, windowSeconds: 3600 };
    const plan = { key: [], account: [accountBudget] };
    const usage = (requestId: string, inputTokens: number) =>
      messagesUsageRecord({
        requestId,
        accountId,
        keyId: budgeted.record.id,
        keyPrefix: budgeted.record.prefix,
        inputTokens,
        outputTokens: 0,
        atMs: clock.now(),
      });
    // What the endpoint is handed, each then settled as delivered (so a lease that ends hands out nothing again).
    const delivered = async () => {
      const claimed = await store.webhooks.claimDeliveries(accountId, clock.now(), LEASE_MS, 100);
      if (claimed === 'idle') return [];
      for (const delivery of claimed) {
        const attempt = { eventId: delivery.eventId, eventType: delivery.eventType, attempt: 1, at: 'now', durationMs: 1 };
        await store.webhooks.settleDelivery({
          delivery,
          settlement: { kind: 'delivered' },
          attempt: { ...attempt, outcome: 'delivered', status: 204 },
          disableAfterFailures: 3,
          disabledReason: 'failed',
          disabledEvent: event('endpoint.disabled'),
        });
      }
      return claimed.map((d) => ({ id: d.eventId, payload: d.payload })).sort((a, b) => a.id.localeCompare(b.id));
    };
    const keyScope = { kind: 'key' as const, keyId: budgeted.record.id, keyPrefix: budgeted.record.prefix };
    await store.applyUsage(usage('t1', 60), plan); // key 60 of 100, account 60 of 200
    expect(await delivered()).toEqual([]);
    await store.applyUsage(usage('t2', 50), plan); // key 110: exhausted
    expect((await store.applyUsage(usage('t2', 50), plan)).kind).toBe('duplicate'); // the same record again
    const reached = tokenBudgetReachedEvent(accountId, 't2', clock.now(), keyScope, keyBudget);
    expect(await delivered()).toEqual([{ id: reached.id, payload: reached.payload }]);
    expect(JSON.parse(reached.payload)).toEqual({
      type: 'budget.reached',
      timestamp: new Date(clock.now()).toISOString(),
      data: {
        account_id: accountId,
        budget: 'token_budget',
        scope: 'key',
        key_id: budgeted.record.id,
        key_prefix: budgeted.record.prefix,
        tokens: 100,
        window_seconds: 60,
      },
    });
    await store.applyUsage(usage('t3', 10), plan); // still exhausted: no other
    expect(await delivered()).toEqual([]);
    clock.advance(30_000); // 50 tokens back: 30 left
    await store.applyUsage(usage('t4', 40), plan); // exhausted again, within a window of the event: no other
    expect(await delivered()).toEqual([]);
    clock.advance(60_000); // 100 more back: 90 left, and a window since the event
    await store.applyUsage(usage('t5', 95), plan); // exhausted again; the account's 200 too (about 250 in use)
    const again = tokenBudgetReachedEvent(accountId, 't5', clock.now(), keyScope, keyBudget);
    const account = tokenBudgetReachedEvent(accountId, 't5', clock.now(), { kind: 'account' }, accountBudget);
    expect(await delivered()).toEqual(
      [again, account].map((e) => ({ id: e.id, payload: e.payload })).sort((a, b) => a.id.localeCompare(b.id)),
    );
    expect((JSON.parse(account.payload) as { data: unknown }).data).toEqual({
      account_id: accountId,
      budget: 'token_budget',
      scope: 'account',
      tokens: 200,
      window_seconds: 3600,
    });
    expect(await store.webhooks.readDeliveryLog(accountId, endpointId, 10)).toHaveLength(3);
  });

  it('appends nothing for an account without endpoints, and an endpoint added later receives only what comes after it', async () => {
    const accountId = unique('acct');
    await store.createAccount(account(accountId, { creditBalance: 1000 }));
    await store.webhooks.setCreditLowThreshold(accountId, 500);
    const key = keyOf(accountId);
    expect(await store.insertKey(key.hash, key.record, [event('key.created')])).toBe('created');
    expect(await store.revokeKey(key.record.id, clock.now(), [event('key.revoked')])).not.toBeNull();
    expect((await store.addMember(member(accountId, 'owner'), [event('member.added')])).kind).toBe('added');
    // 1000 → -200: below the threshold and exhausted
    const usage = messagesUsageRecord({
      requestId: 'n1',
      accountId,
      keyId: key.record.id,
      keyPrefix: key.record.prefix,
      costMinorUnits: 1200,
      atMs: clock.now(),
    });
    expect((await store.applyUsage(usage, NO_TOKEN_BUDGETS)).kind).toBe('applied');

    // Not claimed in between (a claim would fan them out to no endpoint): an endpoint added now finds nothing waiting.
    const endpoint = {
      id: unique('whe').replace(/-/g, ''),
      accountId,
      url: 'https://93.184.216.34/',
      events: ['key.created', 'key.revoked', 'member.added', 'credit.low', 'credit.exhausted'],
      secret: 'whsec_c2VjcmV0',
      createdAt: new Date(T0).toISOString(),
    };
    expect(await store.webhooks.createEndpoint(endpoint, 10)).toBe('created');
    expect(await claim(accountId)).toBe('idle');
    const later = keyOf(accountId);
    const created = event('key.created');
    expect(await store.insertKey(later.hash, later.record, [created])).toBe('created');
    expect(await claim(accountId)).toEqual([created.id]);
  });
});
