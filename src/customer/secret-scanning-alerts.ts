import type { FastifyInstance, FastifyReply } from 'fastify';
import { UNDESCRIBED } from '../http/openapi';
import type { Logger } from '../platform/logger';
import { StoreUnavailableError } from '../ports/store';
import { hashCustomerKey } from '../keys/customer-key';
import { handleExposedKey, type ExposureOutcome, type KeyExposureDeps } from '../keys/key-exposure';
import type { AlertSignatureVerifier } from './github-signing-keys';

/**
 * GitHub's secret scanning partner program posts the tokens it found published
 * here (docs/operations/when-a-key-leaks.md). It is on the customer listener,
 * the one the internet reaches, and authenticates by GitHub's signature alone:
 * no session, no Origin or CSRF check (ownAuthentication). The body is checked
 * as raw bytes before it is parsed; no token, and no token's hash, is ever logged.
 */
export const SECRET_SCANNING_ALERT_PATH = '/secret-scanning/github';

/**
 * GitHub batches matches; each is a token, its type, a URL and a source, a few hundred bytes. 1 MiB holds a few
 * thousand, and a body past it is refused before a byte of it is parsed or verified.
 */
export const MAX_ALERT_BODY_BYTES = 1024 * 1024;
/** Each token costs a lookup (and a write when it is ours); GitHub waits 30 s for the whole answer. */
export const MAX_ALERT_TOKENS = 1_000;
/** Generous bounds for one match's fields (a token of ours is 42 characters; GitHub's URLs are a few hundred). */
const MAX_TOKEN_LENGTH = 1_024;
const MAX_FIELD_LENGTH = 4_096;
/** A key identifier is a SHA-256 hex today; a DER P-256 signature is at most 72 bytes (96 base64 characters). */
const MAX_KEY_ID_LENGTH = 256;
const MAX_SIGNATURE_LENGTH = 256;

export const KEY_ID_HEADER = 'github-public-key-identifier';
export const SIGNATURE_HEADER = 'github-public-key-signature';

export interface SecretScanningDeps {
  signingKeys: AlertSignatureVerifier;
  exposure: KeyExposureDeps;
  logger: Logger;
}

/** One entry of the answer, in the format of GitHub's false-positive feedback. */
export interface AlertFeedback {
  token_hash: string;
  token_type: string;
  label: ExposureOutcome['label'];
}

export async function registerSecretScanningAlerts(app: FastifyInstance, deps: SecretScanningDeps): Promise<void> {
  await app.register(async (scope) => {
    // Only here: the signature covers the raw bytes, so the body reaches the handler unparsed.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: MAX_ALERT_BODY_BYTES }, (_request, body, done) =>
      done(null, body),
    );
    scope.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, _request, reply) => {
      if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        return refuse(
          deps,
          reply,
          413,
          'body_too_large',
          `The body is larger than ${MAX_ALERT_BODY_BYTES} bytes; send fewer matches at a time.`,
        );
      }
      if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
        return refuse(deps, reply, 415, 'unsupported_media_type', 'Send the matches as application/json.');
      }
      if (error instanceof StoreUnavailableError) {
        deps.logger.error({ event: 'secret_scanning_alert', detail: error.message }, 'secret scanning: store unavailable');
        return refuse(deps, reply, 503, 'store_unavailable', 'The key store cannot be reached right now; send the alert again.');
      }
      if (error.statusCode && error.statusCode < 500) return refuse(deps, reply, error.statusCode, 'bad_request', error.message);
      deps.logger.error({ event: 'secret_scanning_alert', detail: error.message }, 'secret scanning: alert failed');
      return refuse(deps, reply, 500, 'internal_error', 'Internal error; send the alert again.');
    });

    scope.post(
      SECRET_SCANNING_ALERT_PATH,
      { config: { ownAuthentication: true }, bodyLimit: MAX_ALERT_BODY_BYTES, schema: UNDESCRIBED },
      async (request, reply) => {
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const keyId = request.headers[KEY_ID_HEADER];
        const signature = request.headers[SIGNATURE_HEADER];
        if (typeof keyId !== 'string' || keyId === '' || typeof signature !== 'string' || signature === '') {
          return refuse(
            deps,
            reply,
            401,
            'signature_missing',
            `Sign the body and send the ${KEY_ID_HEADER} and ${SIGNATURE_HEADER} headers.`,
          );
        }
        if (keyId.length > MAX_KEY_ID_LENGTH || signature.length > MAX_SIGNATURE_LENGTH || !/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) {
          return refuse(deps, reply, 401, 'signature_invalid', 'The signature does not verify.');
        }
        const check = await deps.signingKeys.verify(keyId, Buffer.from(signature, 'base64'), body);
        if (check === 'keys_unavailable') {
          return refuse(deps, reply, 503, 'signing_keys_unavailable', 'The signing keys cannot be loaded right now; send the alert again.');
        }
        if (check === 'unknown_key')
          return refuse(deps, reply, 401, 'signing_key_unknown', 'No published signing key has this identifier.');
        if (check !== 'valid') return refuse(deps, reply, 401, 'signature_invalid', 'The signature does not verify.');

        const matches = parseMatches(body);
        if ('refusal' in matches) return refuse(deps, reply, matches.status, matches.refusal, matches.message);
        const feedback: AlertFeedback[] = [];
        const handled: Record<string, number> = {};
        // One at a time: a batch of a thousand is a thousand lookups, not a thousand at once on the store.
        for (const match of matches) {
          const outcome = await handleExposedKey(deps.exposure, { ...match, reporter: 'github' });
          handled[outcome.handled] = (handled[outcome.handled] ?? 0) + 1;
          // The SHA-256 hex the store indexes keys by is the hash GitHub's feedback format asks for, of any token.
          feedback.push({ token_hash: hashCustomerKey(match.token), token_type: match.type, label: outcome.label });
        }
        deps.logger.info({ event: 'secret_scanning_alert', tokens: matches.length, ...handled }, 'secret scanning: alert handled');
        return reply.code(200).header('cache-control', 'no-store').send(feedback);
      },
    );
  });
}

interface Match {
  token: string;
  type: string;
  url: string;
  source: string;
}

type Refusal = { refusal: 'invalid_alert' | 'too_many_tokens'; status: 400 | 413; message: string };

/** The matches, or why the body is refused (naming the entry and field, never a value). */
function parseMatches(body: Buffer): Match[] | Refusal {
  const invalid = (message: string): Refusal => ({ refusal: 'invalid_alert', status: 400, message });
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return invalid('The body is not JSON.');
  }
  if (!Array.isArray(parsed)) return invalid('The body must be a JSON array of {token, type, url, source}.');
  if (parsed.length > MAX_ALERT_TOKENS) {
    return { refusal: 'too_many_tokens', status: 413, message: `At most ${MAX_ALERT_TOKENS} matches per request; got ${parsed.length}.` };
  }
  const matches: Match[] = [];
  for (const [index, entry] of (parsed as unknown[]).entries()) {
    if (entry === null || typeof entry !== 'object') return invalid(`Entry ${index} is not an object.`);
    const { token, type, url = '', source = '' } = entry as Record<string, unknown>;
    if (typeof token !== 'string' || token === '' || token.length > MAX_TOKEN_LENGTH) {
      return invalid(`Entry ${index}: token must be a string of 1 to ${MAX_TOKEN_LENGTH} characters.`);
    }
    for (const [name, value] of [
      ['type', type],
      ['url', url],
      ['source', source],
    ] as const) {
      if (typeof value !== 'string' || value.length > MAX_FIELD_LENGTH) {
        return invalid(`Entry ${index}: ${name} must be a string of at most ${MAX_FIELD_LENGTH} characters.`);
      }
    }
    matches.push({ token, type: type as string, url: url as string, source: source as string });
  }
  return matches;
}

function refuse(deps: SecretScanningDeps, reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  deps.logger.warn({ event: 'secret_scanning_refused', status, code }, 'secret scanning: alert refused');
  return reply.code(status).header('cache-control', 'no-store').send({ error: { code, message } });
}
