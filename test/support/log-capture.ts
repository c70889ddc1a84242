import { createHash } from 'node:crypto';
import { createLogger, type Logger } from '../../src/platform/logger';
import { recordLogLine } from './secret-scan';

/**
 * Collects every log line a server under test writes, so tests can assert
 * that no secret (full key, key hash, provider key, admin token) ever
 * appears in one.
 */
export class LogCapture {
  readonly lines: string[] = [];
  readonly logger: Logger;

  constructor() {
    this.logger = createLogger('debug', {
      write: (line: string) => {
        this.lines.push(line);
        recordLogLine(line);
      },
    });
  }

  /** Every parsed line with the given `event` field. */
  events(event: string): Record<string, unknown>[] {
    return this.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === event);
  }

  /** Lines that contain a secret, or the SHA-256 hex of one. Empty is the only good answer. */
  leaksOf(secrets: readonly string[]): { secretStart: string; line: string }[] {
    const needles = secrets.flatMap((secret) => [secret, createHash('sha256').update(secret).digest('hex')]);
    return this.lines.flatMap((line) =>
      needles.filter((needle) => line.includes(needle)).map((needle) => ({ secretStart: needle.slice(0, 6), line: line.slice(0, 300) })),
    );
  }
}
