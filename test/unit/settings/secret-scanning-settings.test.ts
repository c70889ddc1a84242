import { loadSettings } from '../../../src/platform/settings';

/** GITHUB_SECRET_SCANNING_KEYS: a URL (https, or http to loopback) or a file path; unset turns the alert endpoint off. */
const load = (value?: string) => loadSettings(value === undefined ? {} : { GITHUB_SECRET_SCANNING_KEYS: value });

describe('GITHUB_SECRET_SCANNING_KEYS', () => {
  it('is off when unset or blank', () => {
    for (const value of [undefined, '', '  ']) {
      const result = load(value);
      expect(result.ok && result.settings.secretScanningKeys).toBe(undefined);
    }
  });

  it.each([
    [
      'https://api.github.com/meta/public_keys/secret_scanning',
      { kind: 'url', url: 'https://api.github.com/meta/public_keys/secret_scanning' },
    ],
    ['http://127.0.0.1:8080/keys', { kind: 'url', url: 'http://127.0.0.1:8080/keys' }],
    ['http://localhost/keys', { kind: 'url', url: 'http://localhost/keys' }],
    ['/etc/gateway-authz/github-keys.json', { kind: 'file', path: '/etc/gateway-authz/github-keys.json' }],
    ['github-keys.json', { kind: 'file', path: 'github-keys.json' }],
  ])('reads %s', (value, source) => {
    const result = load(value);
    expect(result.ok && result.settings.secretScanningKeys).toEqual(source);
  });

  it.each(['http://keys.example.com/secret_scanning', 'ftp://example.com/keys', 'https://user:hunter2@[bad/keys'])(
    'refuses %s, without repeating it',
    (value) => {
      const result = load(value);
      expect(result.ok).toBe(false);
      const problems = result.ok ? [] : result.problems;
      expect(problems).toEqual([expect.stringMatching(/^GITHUB_SECRET_SCANNING_KEYS: must be an https:\/\/ URL/)]);
      expect(problems.join()).not.toContain(value);
    },
  );
});
