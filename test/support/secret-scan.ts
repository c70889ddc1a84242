import { createHash } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Suite-wide secret hygiene. Every log line any server under test writes,
 * and every secret any test makes (customer keys, provider-shaped keys, the
 * admin token), is appended to files in one directory per jest run; the
 * global teardown scans all of it. So "no full key in any log line" is
 * checked over the whole suite's traffic, not one file's.
 */
export const CAPTURE_DIR_ENV = 'GATEWAY_AUTHZ_TEST_CAPTURE_DIR';

function captureDir(): string | undefined {
  return process.env[CAPTURE_DIR_ENV] || undefined;
}

export function recordLogLine(line: string): void {
  const dir = captureDir();
  if (dir) appendFileSync(join(dir, `logs-${process.pid}.ndjson`), line.endsWith('\n') ? line : `${line}\n`);
}

export function registerSecrets(...secrets: string[]): void {
  const dir = captureDir();
  if (dir && secrets.length > 0) appendFileSync(join(dir, `secrets-${process.pid}.txt`), `${secrets.join('\n')}\n`);
}

export interface Leak {
  file: string;
  secretStart: string;
  kind: 'secret' | 'sha256 of secret';
}

/** Every occurrence of a secret or its SHA-256 hex in the given lines. */
export function findLeaks(lines: { file: string; text: string }[], secrets: readonly string[]): Leak[] {
  const needles = secrets.flatMap((secret) => [
    { needle: secret, secret, kind: 'secret' as const },
    { needle: createHash('sha256').update(secret).digest('hex'), secret, kind: 'sha256 of secret' as const },
  ]);
  return lines.flatMap((line) =>
    needles
      .filter(({ needle }) => line.text.includes(needle))
      .map(({ secret, kind }) => ({ file: line.file, secretStart: secret.slice(0, 6), kind })),
  );
}

export function scanCaptureDir(dir: string): { lines: number; secrets: number; leaks: Leak[] } {
  const files = readdirSync(dir);
  const secrets = [
    ...new Set(
      files
        .filter((file) => file.startsWith('secrets-'))
        .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
        .filter((secret) => secret.length >= 8),
    ),
  ];
  const lines = files
    .filter((file) => file.startsWith('logs-'))
    .flatMap((file) =>
      readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter((text) => text !== '')
        .map((text) => ({ file, text })),
    );
  return { lines: lines.length, secrets: secrets.length, leaks: findLeaks(lines, secrets) };
}
