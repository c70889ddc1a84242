import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CAPTURE_DIR_ENV,
  CREATED_KEY_MASK,
  MAX_ITEM_CHARS,
  captureAdminResponses,
  captureFinalState,
  findLeaks,
  flushCaptures,
  recordAdminResponse,
  recordCapture,
  registerSecrets,
  scanCaptureDir,
} from './secret-scan';

describe('the suite-wide secret scan', () => {
  const secret = 'gk_live_ThisIsATestSecret0123456789abcdefgh';

  it('finds a planted secret and a planted hash, and nothing in clean lines', () => {
    const hash = createHash('sha256').update(secret).digest('hex');
    const leaks = findLeaks(
      [
        { file: 'a', text: '{"msg":"clean","keyPrefix":"gk_live_This"}' },
        { file: 'b', text: `{"msg":"oops","key":"${secret}"}` },
        { file: 'c', text: `{"msg":"hash","h":"${hash}"}` },
      ],
      [secret],
    );
    expect(leaks).toEqual([
      { file: 'b', source: 'b', secretStart: 'gk_liv', kind: 'secret' },
      { file: 'c', source: 'c', secretStart: 'gk_liv', kind: 'sha256 of secret' },
    ]);
  });

  it('reads every worker file of a capture directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'scan-test-'));
    writeFileSync(join(dir, 'secrets-1.txt'), `${secret}\n`);
    writeFileSync(join(dir, 'logs-1.ndjson'), '{"msg":"fine"}\n');
    writeFileSync(join(dir, 'logs-2.ndjson'), `{"msg":"${secret}"}\n`);
    expect(scanCaptureDir(dir)).toMatchObject({ lines: 2, secrets: 1, leaks: [{ file: 'logs-2.ndjson', source: 'logs' }] });
  });
});

describe('what the secret scan captures besides log lines', () => {
  const key = 'gk_live_CapturedKeySecret0123456789abcdefgh';
  const otherKey = 'gk_test_AnotherKeySecret0123456789abcdefgh';
  const realDir = process.env[CAPTURE_DIR_ENV];
  let dir: string;

  // Each test writes into its own directory, never the run's: its planted leaks must not fail the real scan.
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'scan-capture-test-'));
    process.env[CAPTURE_DIR_ENV] = dir;
  });
  afterEach(() => {
    if (realDir === undefined) delete process.env[CAPTURE_DIR_ENV];
    else process.env[CAPTURE_DIR_ENV] = realDir;
  });

  it.each(['metrics', 'admin', 'audit', 'bodies'] as const)('finds a leak planted in a %s capture, with its source', (source) => {
    registerSecrets(key);
    recordCapture(source, 'clean', '{"keyPrefix":"gk_live_Capt"}');
    recordCapture(source, 'leaky', `some text\nwith ${key} inside`);
    const scan = scanCaptureDir(dir);
    expect(scan.counts).toEqual({ logs: 0, metrics: 0, admin: 0, audit: 0, bodies: 0, [source]: 2 });
    expect(scan.leaks).toEqual([{ file: `${source}-${process.pid}.ndjson`, source, secretStart: 'gk_liv', kind: 'secret' }]);
  });

  it('finds the sha256 hex of a secret in a captured item', () => {
    registerSecrets(key);
    recordCapture(
      'audit',
      'GET /admin/audit 200',
      JSON.stringify({ entries: [{ detail: createHash('sha256').update(key).digest('hex') }] }),
    );
    expect(scanCaptureDir(dir).leaks).toEqual([
      { file: `audit-${process.pid}.ndjson`, source: 'audit', secretStart: 'gk_liv', kind: 'sha256 of secret' },
    ]);
  });

  it('masks only the `key` field of create/rotate answers, and still finds a key anywhere else in them', () => {
    const created = recordAdminResponse(
      'POST',
      '/admin/accounts/acme/keys',
      201,
      JSON.stringify({ id: 'key_a', key, prefix: 'gk_live_Capt' }),
    );
    expect(created).toBe(key);
    expect(scanCaptureDir(dir)).toMatchObject({ secrets: 1, counts: { admin: 1 }, leaks: [] });
    expect(readFileSync(join(dir, `admin-${process.pid}.ndjson`), 'utf8')).toContain(CREATED_KEY_MASK);

    registerSecrets(otherKey);
    recordAdminResponse('POST', '/admin/keys/key_a/rotate', 201, JSON.stringify({ key: otherKey, oldKey: { id: 'key_a', note: key } }));
    recordAdminResponse('GET', '/admin/keys/key_b', 200, JSON.stringify({ id: 'key_b', key: otherKey }));
    expect(scanCaptureDir(dir).leaks).toEqual([
      { file: `admin-${process.pid}.ndjson`, source: 'admin', secretStart: 'gk_liv', kind: 'secret' },
      { file: `admin-${process.pid}.ndjson`, source: 'admin', secretStart: 'gk_tes', kind: 'secret' },
    ]);
  });

  it('labels an item by route shape, never by a key sent in the path', () => {
    registerSecrets(key);
    recordAdminResponse('GET', `/admin/keys/${key}?x=${key}`, 404, '{"error":{"code":"key_not_found"}}');
    expect(scanCaptureDir(dir).leaks).toEqual([]);
    expect(readFileSync(join(dir, `admin-${process.pid}.ndjson`), 'utf8')).toContain('GET /admin/keys/:id 404');
  });

  it('cuts a giant item to MAX_ITEM_CHARS', () => {
    recordCapture('metrics', 'big', 'x'.repeat(MAX_ITEM_CHARS * 3));
    flushCaptures();
    const [line] = readFileSync(join(dir, `metrics-${process.pid}.ndjson`), 'utf8').split('\n');
    expect((JSON.parse(line!) as { text: string }).text).toHaveLength(MAX_ITEM_CHARS);
  });

  it('records what tests fetch from a registered admin URL, by source, and a final scrape and audit read', async () => {
    const server = createServer((request, response) => {
      if (request.url === '/metrics') response.end(`leaky_metric{k="${key}"} 1\n`);
      else if (request.url?.startsWith('/admin/audit'))
        response.end(JSON.stringify({ entries: [{ keyPrefix: 'gk_live_Capt' }], next: null }));
      else response.end(JSON.stringify({ ok: true }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      registerSecrets(key);
      captureAdminResponses(url);
      expect(await (await fetch(`${url}/metrics`)).text()).toContain('leaky_metric');
      await fetch(`${url}/admin/accounts`);
      await captureFinalState(url, 'token');
      // A server that is gone records nothing and does not throw.
      await captureFinalState('http://127.0.0.1:1', 'token', 200);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const scan = scanCaptureDir(dir);
    expect(scan.counts).toEqual({ logs: 0, metrics: 2, admin: 1, audit: 1, bodies: 0 });
    expect(scan.leaks.map((leak) => leak.source)).toEqual(['metrics', 'metrics']);
  });
});
