import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CAPTURE_DIR_ENV } from './secret-scan';

export default function globalSetup(): void {
  // Workers inherit the environment, so every suite writes into this run's directory.
  process.env[CAPTURE_DIR_ENV] = mkdtempSync(join(tmpdir(), 'gateway-authz-capture-'));
}
