import { rmSync } from 'node:fs';
import { CAPTURE_DIR_ENV, CAPTURE_SOURCES, scanCaptureDir } from './secret-scan';

const itemNames: Record<(typeof CAPTURE_SOURCES)[number], string> = {
  logs: 'log lines',
  metrics: 'metrics bodies',
  admin: 'admin API responses',
  audit: 'audit log pages',
  bodies: 'Check responses/errors',
};

export default function globalTeardown(): void {
  const dir = process.env[CAPTURE_DIR_ENV];
  if (!dir) return;
  const { lines, counts, secrets, leaks } = scanCaptureDir(dir);
  const scanned = CAPTURE_SOURCES.map((source) => `${counts[source]} ${itemNames[source]}`).join(', ');
  if (secrets > 0 && lines === 0) {
    // Only suites without a server ran (a partial run); nothing to scan.
    process.stdout.write(`\nsecret hygiene: nothing captured in this run (${secrets} secrets registered); nothing to scan\n`);
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  if (leaks.length > 0) {
    throw new Error(
      `secret hygiene: ${leaks.length} captured item(s) contain a secret: ${JSON.stringify(leaks.slice(0, 10))} (scanned ${scanned}; capture kept in ${dir})`,
    );
  }
  process.stdout.write(`\nsecret hygiene: ${scanned} from the whole suite scanned for ${secrets} secrets and their hashes: no leak\n`);
  rmSync(dir, { recursive: true, force: true });
}
