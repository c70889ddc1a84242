import type { ApiAccount, ApiKey, ApiRotatedKey } from '../../../src/cli/api-types';
import { renderAccount, renderAccountList } from '../../../src/cli/commands/accounts';
import { oldKeyFate, renderKey, renderKeyList, renderRotation, shownPrefix } from '../../../src/cli/commands/keys';

const key = (fields: Partial<ApiKey> = {}): ApiKey => ({
  id: 'key_AAAAAAAAAAAAAAAA',
  accountId: 'acme',
  prefix: 'gk_live_AbC4',
  name: 'deploy bot',
  environment: 'live',
  status: 'active',
  createdAt: '2025-03-04T05:06:07.000Z',
  lastUsedAt: null,
  expiresAt: null,
  revokedAt: null,
  revokeAt: null,
  replaces: null,
  replacedBy: null,
  limits: null,
  ...fields,
});

const account = (fields: Partial<ApiAccount> = {}): ApiAccount => ({
  id: 'acme',
  name: 'Acme',
  billing: { status: 'active', creditBalance: null },
  limits: { key: null, account: null },
  createdAt: '2025-01-02T03:04:05.000Z',
  ...fields,
});

describe('key views', () => {
  it('shows at most the display prefix of a key, followed by …', () => {
    expect(shownPrefix('gk_live_AbC4')).toBe('gk_live_AbC4…');
    expect(shownPrefix('gk_live_AbC4EFGHIJKLMNOPQRSTUVWXYZabcdefghij')).toBe('gk_live_AbC4…');
  });

  it('lists keys as a table with never and - for what is not set', () => {
    const text = renderKeyList('acme', {
      keys: [
        key(),
        key({
          id: 'key_BBBBBBBBBBBBBBBB',
          prefix: 'gk_test_Zz99',
          name: 'ci',
          environment: 'test',
          lastUsedAt: '2025-03-05T10:00:59.000Z',
          expiresAt: '2026-01-01T00:00:00.000Z',
          revokeAt: '2025-03-05T11:00:00.000Z',
        }),
        key({ id: 'key_CCCCCCCCCCCCCCCC', status: 'revoked', revokedAt: '2025-03-05T00:00:00.000Z' }),
      ],
    });
    expect(text).toBe(
      [
        'PREFIX         NAME        ENV   STATUS                          CREATED            LAST USED          EXPIRES            ID',
        'gk_live_AbC4…  deploy bot  live  active                          2025-03-04 05:06Z  never              -                  key_AAAAAAAAAAAAAAAA',
        'gk_test_Zz99…  ci          test  active until 2025-03-05 11:00Z  2025-03-04 05:06Z  2025-03-05 10:00Z  2026-01-01 00:00Z  key_BBBBBBBBBBBBBBBB',
        'gk_live_AbC4…  deploy bot  live  revoked                         2025-03-04 05:06Z  never              -                  key_CCCCCCCCCCCCCCCC',
        '',
      ].join('\n'),
    );
  });

  it('says when an account has no keys', () => {
    expect(renderKeyList('acme', { keys: [] })).toBe('Account acme has no keys.\n');
  });

  it('shows one key as key-value lines, with the rotation fields only when set', () => {
    const plain = renderKey(key());
    expect(plain).toContain('last used    never\n');
    expect(plain).toContain('expires      never\n');
    expect(plain).not.toContain('replaces');
    expect(plain).not.toContain('stops working');
    const rotating = renderKey(key({ revokeAt: '2025-03-05T11:00:00.000Z', replacedBy: 'key_N', limits: [{ limit: 5, window: '1s' }] }));
    expect(rotating).toContain('stops working  2025-03-05T11:00:00.000Z\n');
    expect(rotating).toContain('replaced by    key_N\n');
    expect(rotating).toContain('limits         5/1s\n');
  });

  const rotated = (oldKey: ApiKey): ApiRotatedKey => ({
    id: 'key_NNNNNNNNNNNNNNNN',
    key: 'gk_live_NewKeyNewKeyNewKeyNewKeyNewKeyNe',
    prefix: 'gk_live_NewK',
    accountId: 'acme',
    name: 'deploy bot',
    environment: 'live',
    createdAt: '2025-03-05T10:00:00.000Z',
    replaces: oldKey.id,
    oldKey,
  });

  it('says the old key is refused now after an immediate rotation', () => {
    expect(oldKeyFate(rotated(key({ status: 'revoked' })), 0)).toBe(
      'The old key gk_live_AbC4… (key_AAAAAAAAAAAAAAAA) is refused from now on.\n',
    );
  });

  it('says until when the old key works after a rotation with grace', () => {
    expect(oldKeyFate(rotated(key({ revokeAt: '2025-03-05T11:00:00.000Z' })), 3600)).toBe(
      'The old key gk_live_AbC4… (key_AAAAAAAAAAAAAAAA) keeps working until 2025-03-05 11:00Z (grace 1h), then is refused.\n',
    );
  });

  it('prints the new key exactly once, on its own line, with the warning', () => {
    const answer = rotated(key({ status: 'revoked' }));
    const text = renderRotation(answer, 0);
    expect(text.split(answer.key)).toHaveLength(2);
    expect(text).toContain(`\n    ${answer.key}\n`);
    expect(text).toContain('Store this key now: it will not be shown again.');
    expect(text).toContain('replaces     key_AAAAAAAAAAAAAAAA\n');
  });
});

describe('account views', () => {
  it('lists accounts with billing and a right-aligned balance', () => {
    const text = renderAccountList({
      accounts: [
        account(),
        account({ id: 'globex', name: 'Globex', billing: { status: 'suspended', creditBalance: -50 } }),
        account({ id: 'initech', name: 'Initech', billing: { status: 'active', creditBalance: 125000 } }),
      ],
    });
    expect(text).toBe(
      [
        'ID       NAME     BILLING             BALANCE  CREATED',
        'acme     Acme     active, post-paid         -  2025-01-02 03:04Z',
        'globex   Globex   suspended, prepaid      -50  2025-01-02 03:04Z',
        'initech  Initech  active, prepaid      125000  2025-01-02 03:04Z',
        '',
      ].join('\n'),
    );
    expect(renderAccountList({ accounts: [] })).toBe('No accounts.\n');
    // A server that formats money (issue 35): the balance as money.
    const formatted = account({
      id: 'initech',
      name: 'Initech',
      billing: { status: 'active', creditBalance: 125_000, creditBalanceFormatted: '$0.125' },
    });
    expect(renderAccountList({ accounts: [formatted] })).toMatch(/^initech\s+Initech\s+active, prepaid\s+\$0\.125\s+2025-01-02 03:04Z$/m);
  });

  it('shows one account as key-value lines', () => {
    expect(renderAccount(account({ limits: { key: [{ limit: 100, window: '1m' }], account: null } }))).toBe(
      [
        'id              acme',
        'name            Acme',
        'status          active',
        'billing         post-paid',
        'credit balance  - (post-paid)',
        'key limits      100/1m',
        "account limits  not overridden (the plan's limits apply)",
        'created         2025-01-02T03:04:05.000Z',
        '',
      ].join('\n'),
    );
  });
});
