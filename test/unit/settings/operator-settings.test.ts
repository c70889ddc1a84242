import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCliSettings } from '../../../src/platform/settings';
import { parseRoleMap } from '../../../src/platform/operator-sign-in-settings';
import { problemsOf, settingsOf } from '../../support/settings-results';

type Env = Record<string, string | undefined>;

const TOKEN = 'a-break-glass-token-0123456789';
const CONFIGURED: Env = {
  OPERATOR_OIDC_ISSUER_URL: 'https://login.example.com/staff',
  OPERATOR_OIDC_CLIENT_ID: 'operator-dashboard',
  OPERATOR_OIDC_REDIRECT_URL: 'https://admin.example.com/dashboard/auth/callback',
  OPERATOR_OIDC_ROLE_MAP: 'gw-admins=admin, gw-money=billing+support',
  OPERATOR_SESSION_SECRET: 'an-operator-session-secret-of-32-characters',
};

describe('the break-glass ADMIN_TOKEN', () => {
  it('is on when set, and ADMIN_TOKEN_ENABLED=false turns it off while it stays set', () => {
    expect(settingsOf({ ADMIN_TOKEN: TOKEN }).adminToken).toBe(TOKEN);
    expect('adminToken' in settingsOf({ ADMIN_TOKEN: TOKEN, ADMIN_TOKEN_ENABLED: 'false' })).toBe(false);
    expect(problemsOf({ ADMIN_TOKEN_ENABLED: 'no' }).join()).toContain('ADMIN_TOKEN_ENABLED');
  });
});

describe('operator sign-in settings', () => {
  it('are off by default', () => {
    expect(settingsOf({}).operatorSignIn).toBeUndefined();
  });

  it('read the client, the role claim and its mapping, with shorter sessions than customers by default', () => {
    expect(settingsOf(CONFIGURED).operatorSignIn).toEqual({
      issuerUrl: 'https://login.example.com/staff',
      clientId: 'operator-dashboard',
      redirectUrl: 'https://admin.example.com/dashboard/auth/callback',
      publicOrigin: 'https://admin.example.com',
      scopes: ['openid', 'email', 'profile', 'groups'],
      identityClaim: 'sub',
      rolesClaim: 'groups',
      roleMap: { 'gw-admins': ['admin'], 'gw-money': ['billing', 'support'] },
      sessionSecret: CONFIGURED.OPERATOR_SESSION_SECRET,
      sessionIdleMs: 900_000,
      sessionMaxAgeMs: 28_800_000,
      plainHttpLocalhost: false,
    });
  });

  it.each([
    [{ OPERATOR_OIDC_ROLE_MAP: undefined }, 'OPERATOR_OIDC_ROLE_MAP: required'],
    [{ OPERATOR_OIDC_ROLE_MAP: 'gw-admins=root' }, 'OPERATOR_OIDC_ROLE_MAP'],
    [{ OPERATOR_OIDC_REDIRECT_URL: 'https://admin.example.com/auth/callback' }, '/dashboard/auth/callback'],
    [{ OPERATOR_OIDC_REDIRECT_URL: 'http://admin.example.com/dashboard/auth/callback' }, 'https://'],
    [{ OPERATOR_SESSION_SECRET: 'short' }, 'OPERATOR_SESSION_SECRET'],
    [{ OPERATOR_OIDC_CLIENT_ID: undefined }, 'OPERATOR_OIDC_CLIENT_ID'],
    [{ OPERATOR_OIDC_SCOPES: 'email groups' }, "must include 'openid'"],
  ])('refuses %j', (change, problem) => {
    expect(problemsOf({ ...CONFIGURED, ...change }).join('\n')).toContain(problem);
  });

  it('refuses a half-done configuration rather than ignoring it', () => {
    expect(problemsOf({ OPERATOR_OIDC_CLIENT_ID: 'x' }).join()).toContain('OPERATOR_OIDC_ISSUER_URL: required');
  });

  it('parses a role map of several values and roles, refusing an empty one', () => {
    expect(parseRoleMap('a=admin,a=support,b=billing')).toEqual({ map: { a: ['admin', 'support'], b: ['billing'] } });
    expect(parseRoleMap(' , ')).toEqual({ problem: 'maps no value to a role' });
  });
});

describe('the CLI token', () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-token-'));
  const file = join(dir, 'token');
  writeFileSync(file, 'gko_fromafile\n');

  it('comes from OPERATOR_TOKEN, or the file OPERATOR_TOKEN_FILE names, before the break-glass ADMIN_TOKEN', () => {
    expect(loadCliSettings({ OPERATOR_TOKEN: ' gko_inline ', ADMIN_TOKEN: TOKEN }).adminToken).toBe('gko_inline');
    expect(loadCliSettings({ OPERATOR_TOKEN_FILE: file, ADMIN_TOKEN: TOKEN }).adminToken).toBe('gko_fromafile');
    expect(loadCliSettings({ ADMIN_TOKEN: TOKEN }).adminToken).toBe(TOKEN);
  });

  it('refuses both at once, and a file it cannot read, without showing its contents', () => {
    expect(() => loadCliSettings({ OPERATOR_TOKEN: 'a', OPERATOR_TOKEN_FILE: file })).toThrow('not both');
    expect(() => loadCliSettings({ OPERATOR_TOKEN_FILE: join(dir, 'missing') })).toThrow('ENOENT');
    writeFileSync(join(dir, 'two'), 'one two');
    expect(() => loadCliSettings({ OPERATOR_TOKEN_FILE: join(dir, 'two') })).toThrow('one token and nothing else');
  });
});
