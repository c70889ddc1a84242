import { addressRefusal, urlProblem } from '../../../src/webhooks/endpoint-targets';
import { retryDelayMs } from '../../../src/webhooks/webhook-dispatcher';
import type { WebhookSettings } from '../../../src/platform/settings';

const SETTINGS: WebhookSettings = {
  pollIntervalMs: 1000,
  maxAttempts: 10,
  retryBaseMs: 30_000,
  retryMaxDelayMs: 14_400_000,
  connectTimeoutMs: 5000,
  responseTimeoutMs: 15_000,
  disableAfterFailures: 50,
  allowPrivateTargets: false,
  loopbackHttp: false,
};

describe('the retry schedule (docs/concepts/webhooks.md)', () => {
  it('doubles from the base up to the cap, half of each pause fixed and half random', () => {
    const lowest = (n: number) => retryDelayMs(n, SETTINGS, () => 0);
    const highest = (n: number) => retryDelayMs(n, SETTINGS, () => 1 - Number.EPSILON);
    expect([1, 2, 3, 9].map(lowest)).toEqual([15_000, 30_000, 60_000, 3_840_000]);
    expect([1, 2, 3, 9].map(highest)).toEqual([30_000, 60_000, 120_000, 7_680_000]);
    expect(highest(30)).toBe(SETTINGS.retryMaxDelayMs);
    expect(lowest(30)).toBe(SETTINGS.retryMaxDelayMs / 2);
  });
});

describe('where an endpoint may point', () => {
  const strict = { allowPrivate: false, loopbackHttp: false };
  it.each([
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.0.10', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.1.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:10.0.0.1', 'private'],
    ['fc00::1', 'private'],
    ['fe80::1', 'private'],
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'private'],
    ['93.184.216.34', undefined],
    ['2606:2800:220:1:248:1893:25c8:1946', undefined],
  ])('%s: %s', (address, refusal) => {
    expect(addressRefusal(address, strict)).toBe(refusal);
  });

  it('allows private and loopback targets when the operator does, never the metadata addresses', () => {
    const open = { allowPrivate: true, loopbackHttp: false };
    expect(addressRefusal('10.1.2.3', open)).toBeUndefined();
    expect(addressRefusal('127.0.0.1', open)).toBeUndefined();
    expect(addressRefusal('169.254.169.254', open)).toBe('metadata');
    expect(addressRefusal('127.0.0.1', { allowPrivate: false, loopbackHttp: true })).toBeUndefined();
    expect(addressRefusal('10.1.2.3', { allowPrivate: false, loopbackHttp: true })).toBe('private');
  });

  it('wants https; plain http only to a loopback host in local development', () => {
    expect(urlProblem('https://hooks.example.com/x', strict)).toBeUndefined();
    expect(urlProblem('http://hooks.example.com/x', strict)).toContain('https');
    expect(urlProblem('http://127.0.0.1:8080/x', strict)).toContain('https');
    expect(urlProblem('http://127.0.0.1:8080/x', { allowPrivate: false, loopbackHttp: true })).toBeUndefined();
    expect(urlProblem('http://localhost:8080/x', { allowPrivate: false, loopbackHttp: true })).toBeUndefined();
    expect(urlProblem('http://10.0.0.1/x', { allowPrivate: true, loopbackHttp: true })).toContain('https');
    expect(urlProblem('ftp://hooks.example.com/', strict)).toContain('https');
    expect(urlProblem('https://user:pw@hooks.example.com/', strict)).toContain('user name');
    expect(urlProblem('not a url', strict)).toBe('not a URL');
  });
});
