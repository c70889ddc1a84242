import { rmSync } from 'node:fs';
import { CAPTURE_DIR_ENV, scanCaptureDir } from './secret-scan';

export default function globalTeardown(): void {
  const dir = process.env[CAPTURE_DIR_ENV];
  if (!dir) return;
  const { lines, secrets, leaks } = scanCaptureDir(dir);
  if (secrets > 0 && lines === 0) {
    // Only suites without a server ran (a partial run); nothing to scan.
    process.stdout.write(`\nsecret hygiene: no server logged in this run (${secrets} secrets registered); nothing to scan\n`);
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  if (leaks.length > 0) {
    throw new Error(
      `secret hygiene: ${leaks.length} log line(s) contain a secret: ${JSON.stringify(leaks.slice(0, 10))} (capture kept in ${dir})`,
    );
  }
  process.stdout.write(`\nsecret hygiene: ${lines} log lines from the whole suite scanned for ${secrets} secrets and their hashes: no leak\n`);
  rmSync(dir, { recursive: true, force: true });
}
