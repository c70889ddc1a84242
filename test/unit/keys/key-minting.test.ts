import { hashCustomerKey, parseCustomerKey } from '../../../src/keys/customer-key';
import { mintKey, successorTerms } from '../../../src/keys/key-minting';
import type { StoredKey } from '../../../src/keys/key-records';

const NOW = Date.parse('2026-11-23T12:00:00Z');

describe('mintKey', () => {
  it('makes a valid key of the asked environment, its hash, and an active record showing only the display prefix', () => {
    const { key, keyHash, record } = mintKey({ accountId: 'acme', name: 'ci', environment: 'test' }, NOW);
    const parsed = parseCustomerKey(key);
    expect(parsed).toEqual({ ok: true, environment: 'test', displayPrefix: record.prefix });
    expect(keyHash).toBe(hashCustomerKey(key));
    expect(record.id).toMatch(/^key_[0-9A-Za-z]{16}$/);
    expect(record).toEqual({
      id: record.id,
      accountId: 'acme',
      prefix: key.slice(0, record.prefix.length),
      name: 'ci',
      environment: 'test',
      status: 'active',
      createdAt: '2026-11-23T12:00:00.000Z',
    });
    expect(JSON.stringify(record)).not.toContain(key);
  });

  it('never mints the same key or id twice', () => {
    const minted = Array.from({ length: 50 }, () => mintKey({ accountId: 'acme', name: 'x', environment: 'live' }, NOW));
    expect(new Set(minted.map((m) => m.key)).size).toBe(50);
    expect(new Set(minted.map((m) => m.record.id)).size).toBe(50);
  });
});

describe('successorTerms', () => {
  const old: StoredKey = {
    id: 'key_old',
    accountId: 'acme',
    prefix: 'gk_live_AbCd',
    name: 'prod backend',
    environment: 'live',
    status: 'active',
    createdAt: '2026-01-01T00:00:00.000Z',
    expiresAt: '2027-01-01T00:00:00.000Z',
    limits: [{ limit: 5, windowSeconds: 60 }],
    lastUsedAt: '2026-11-22T00:00:00.000Z',
    revokeAt: '2026-12-01T00:00:00.000Z',
    replaces: 'key_older',
  };

  it('inherits account, name, environment, limits and expiry, and names the key it replaces; usage and revocation start fresh', () => {
    expect(successorTerms(old)).toEqual({
      accountId: 'acme',
      name: 'prod backend',
      environment: 'live',
      expiresAt: '2027-01-01T00:00:00.000Z',
      limits: [{ limit: 5, windowSeconds: 60 }],
      replaces: 'key_old',
    });
    const { record } = mintKey(successorTerms(old), NOW);
    expect(record).not.toHaveProperty('lastUsedAt');
    expect(record).not.toHaveProperty('revokeAt');
    expect(record.expiresAt).toBe(old.expiresAt);
  });

  it('inherits token budgets and the monthly spend cap: rotating never lifts a cap', () => {
    const capped = { ...old, tokenBudgets: [{ tokens: 1_000, windowSeconds: 60 }], monthlySpendCap: 500 };
    expect(successorTerms(capped)).toMatchObject({ tokenBudgets: [{ tokens: 1_000, windowSeconds: 60 }], monthlySpendCap: 500 });
    expect(mintKey(successorTerms(capped), NOW).record).toMatchObject({ tokenBudgets: capped.tokenBudgets, monthlySpendCap: 500 });
  });

  it('inherits restrictions: rotating never widens what a key may do', () => {
    const restricted = {
      ...old,
      restrictions: { endpoints: ['/v1/embeddings'], models: ['text-embedding-3*'], sourceAddresses: ['10.0.0.0/8'] },
    };
    expect(successorTerms(restricted).restrictions).toEqual(restricted.restrictions);
    expect(mintKey(successorTerms(restricted), NOW).record.restrictions).toEqual(restricted.restrictions);
  });

  it('leaves the expiry and limits out when the old key had none', () => {
    const { expiresAt: _expiresAt, limits: _limits, ...plain } = old;
    expect(successorTerms(plain)).toEqual({ accountId: 'acme', name: 'prod backend', environment: 'live', replaces: 'key_old' });
  });
});
