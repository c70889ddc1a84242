import { mkdtempSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLeaks, scanCaptureDir } from './secret-scan';

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
      { file: 'b', secretStart: 'gk_liv', kind: 'secret' },
      { file: 'c', secretStart: 'gk_liv', kind: 'sha256 of secret' },
    ]);
  });

  it('reads every worker file of a capture directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'scan-test-'));
    writeFileSync(join(dir, 'secrets-1.txt'), `${secret}\n`);
    writeFileSync(join(dir, 'logs-1.ndjson'), '{"msg":"fine"}\n');
    writeFileSync(join(dir, 'logs-2.ndjson'), `{"msg":"${secret}"}\n`);
    expect(scanCaptureDir(dir)).toMatchObject({ lines: 2, secrets: 1, leaks: [{ file: 'logs-2.ndjson' }] });
  });
});
