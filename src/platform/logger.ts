import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './settings';

export type { Logger } from 'pino';

/**
 * Defence in depth: decision lines never carry headers, but if anything ever
 * logs a header map or an admin request, credentials are censored.
 */
const REDACT_PATHS = [
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["x-vendorg-api-key"]',
  'headers["x-goog-api-key"]',
  'req.headers.authorization',
  'key',
  'adminToken',
];

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'gateway-authz' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Labels rather than numbers: what log pipelines and humans filter on.
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}
