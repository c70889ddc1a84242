import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GitHubSigningKeys, UNKNOWN_KEY_REFRESH_INTERVAL_MS } from '../../../src/customer/github-signing-keys';
import { ManualClock } from '../../../src/platform/clock';
import { LogCapture } from '../../support/log-capture';

/**
 * GitHub's key set as the signature check reads it, from a file and from a URL, on a clock that moves only when
 * told: what is accepted in the set, when it is read again, and what a failed read leaves in use.
 */
const body = Buffer.from('[{"token":"x","type":"t","url":"","source":"content"}]');

function keyPair(options: { namedCurve: string } = { namedCurve: 'prime256v1' }): { privateKey: KeyObject; pem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', options);
  return { privateKey, pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}
const signatureOf = (privateKey: KeyObject) => sign('sha256', body, { key: privateKey, dsaEncoding: 'der' });
const keySet = (...keys: { id: string; pem: string }[]) =>
  JSON.stringify({ public_keys: keys.map(({ id, pem }) => ({ key_identifier: id, key: pem, is_current: false })) });

const current = keyPair();
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'signing-keys-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('from a file', () => {
  it('verifies with any P-256 key of the set, and skips keys of other kinds without refusing the set', async () => {
    const path = join(dir, 'mixed.json');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const p384 = keyPair({ namedCurve: 'secp384r1' });
    writeFileSync(path, keySet({ id: 'rsa', pem: rsa }, { id: 'p384', pem: p384.pem }, { id: 'good', pem: current.pem }));
    const keys = new GitHubSigningKeys({ kind: 'file', path }, new ManualClock(0), new LogCapture().logger);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('valid');
    expect(await keys.verify('p384', signatureOf(p384.privateKey), body)).toBe('unknown_key');
    expect(await keys.verify('good', signatureOf(keyPair().privateKey), body)).toBe('invalid_signature');
    expect(await keys.verify('good', Buffer.from('not DER'), body)).toBe('invalid_signature');
  });

  it('answers keys_unavailable while the set cannot be read, and reads it again 30 s after a failure', async () => {
    const path = join(dir, 'later.json');
    const clock = new ManualClock(0);
    const logs = new LogCapture();
    const keys = new GitHubSigningKeys({ kind: 'file', path }, clock, logs.logger);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('keys_unavailable');
    expect(logs.events('secret_scanning_keys')).toEqual([expect.objectContaining({ keptKeys: 0 })]);
    // The unknown key id's own refresh, once (it too fails).
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('keys_unavailable');
    writeFileSync(path, keySet({ id: 'good', pem: current.pem }));
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('keys_unavailable');
    clock.advance(30_000);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('valid');
  });
});

describe('from a URL', () => {
  let server: Server;
  let url: string;
  let answer: { status: number; text: string };
  let fetches = 0;
  beforeAll(async () => {
    server = createServer((_request, response) => {
      fetches += 1;
      response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.text);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/keys`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('keeps a fetched set for an hour, and keeps using it when a later fetch fails', async () => {
    answer = { status: 200, text: keySet({ id: 'good', pem: current.pem }) };
    const clock = new ManualClock(0);
    const keys = new GitHubSigningKeys({ kind: 'url', url }, clock, new LogCapture().logger);
    const before = fetches;
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('valid');
    clock.advance(3_599_999);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('valid');
    expect(fetches).toBe(before + 1);
    answer = { status: 502, text: 'bad gateway' };
    clock.advance(1);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('valid');
    expect(fetches).toBe(before + 2);
  });

  it('refreshes for an unknown key id at most once per interval, and concurrent alerts share one fetch', async () => {
    answer = { status: 200, text: keySet({ id: 'good', pem: current.pem }) };
    const clock = new ManualClock(0);
    const keys = new GitHubSigningKeys({ kind: 'url', url }, clock, new LogCapture().logger);
    const before = fetches;
    const first = await Promise.all([1, 2, 3].map(() => keys.verify('good', signatureOf(current.privateKey), body)));
    expect(first).toEqual(['valid', 'valid', 'valid']);
    expect(fetches).toBe(before + 1);
    expect(await keys.verify('new', signatureOf(current.privateKey), body)).toBe('unknown_key');
    expect(await keys.verify('new', signatureOf(current.privateKey), body)).toBe('unknown_key');
    expect(fetches).toBe(before + 2);
    answer = { status: 200, text: keySet({ id: 'good', pem: current.pem }, { id: 'new', pem: current.pem }) };
    clock.advance(UNKNOWN_KEY_REFRESH_INTERVAL_MS - 1);
    expect(await keys.verify('new', signatureOf(current.privateKey), body)).toBe('unknown_key');
    clock.advance(1);
    expect(await keys.verify('new', signatureOf(current.privateKey), body)).toBe('valid');
    expect(fetches).toBe(before + 3);
  });

  it('refuses a set larger than 64 KiB', async () => {
    answer = {
      status: 200,
      text: keySet({ id: 'good', pem: current.pem }).replace('"public_keys"', `"pad":"${'x'.repeat(70_000)}","public_keys"`),
    };
    const keys = new GitHubSigningKeys({ kind: 'url', url }, new ManualClock(0), new LogCapture().logger);
    expect(await keys.verify('good', signatureOf(current.privateKey), body)).toBe('keys_unavailable');
  });
});
