import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Clock } from '../platform/clock';
import type { Logger } from '../platform/logger';
import type { SecretScanningKeySource } from '../platform/settings';

/**
 * GitHub's secret-scanning signing keys, as GitHub publishes them
 * (`{"public_keys": [{"key_identifier", "key" (PEM), "is_current"}]}`), and the
 * check of an alert's signature against them: ECDSA on P-256 with SHA-256 over
 * the raw body, DER-encoded, by node:crypto.
 */

/** A fetched set is used this long: GitHub publishes a new key before it signs with it, so an hour-old set knows it. */
const KEY_SET_MAX_AGE_MS = 3_600_000;
/**
 * An alert signed by a key id the set lacks refreshes the set at most this often. GitHub's API allows 60
 * unauthenticated requests an hour per address: forged key ids must not spend them (nor make one request each).
 */
export const UNKNOWN_KEY_REFRESH_INTERVAL_MS = 300_000;
/** After a failed fetch, the next alert tries again only after this long, and the last good set (if any) stays in use. */
const RETRY_AFTER_FAILURE_MS = 30_000;
/** GitHub answers the alert within its own 30 s timeout only if the key set arrives well within it. */
const KEY_SET_FETCH_TIMEOUT_MS = 5_000;
/** The published set is a few keys of a few hundred bytes each; anything far larger is not it. */
const MAX_KEY_SET_BYTES = 64 * 1024;

export type SignatureCheck = 'valid' | 'unknown_key' | 'invalid_signature' | 'keys_unavailable';

export interface AlertSignatureVerifier {
  verify(keyId: string, signature: Buffer, body: Buffer): Promise<SignatureCheck>;
}

export class GitHubSigningKeys implements AlertSignatureVerifier {
  private keys = new Map<string, KeyObject>();
  private loaded = false;
  private nextRefreshAtMs = 0;
  private nextUnknownKeyRefreshAtMs = 0;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly source: SecretScanningKeySource,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async verify(keyId: string, signature: Buffer, body: Buffer): Promise<SignatureCheck> {
    let refreshed = false;
    if (this.clock.now() >= this.nextRefreshAtMs) {
      await this.refresh();
      refreshed = true;
    }
    let key = this.keys.get(keyId);
    const now = this.clock.now();
    if (!key && !refreshed && now >= this.nextUnknownKeyRefreshAtMs) {
      this.nextUnknownKeyRefreshAtMs = now + UNKNOWN_KEY_REFRESH_INTERVAL_MS;
      await this.refresh();
      key = this.keys.get(keyId);
    }
    if (!key) return this.loaded ? 'unknown_key' : 'keys_unavailable';
    try {
      return verify('sha256', body, { key, dsaEncoding: 'der' }, signature) ? 'valid' : 'invalid_signature';
    } catch {
      // Not a DER signature at all.
      return 'invalid_signature';
    }
  }

  /** One fetch at a time: alerts that arrive meanwhile wait for it instead of starting their own. */
  private refresh(): Promise<void> {
    this.refreshing ??= this.load().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async load(): Promise<void> {
    try {
      const keys = parseKeySet(await this.read());
      this.keys = keys;
      this.loaded = true;
      this.nextRefreshAtMs = this.clock.now() + KEY_SET_MAX_AGE_MS;
      this.logger.info({ event: 'secret_scanning_keys', keyIds: [...keys.keys()] }, 'secret scanning: signing keys loaded');
    } catch (error) {
      this.nextRefreshAtMs = this.clock.now() + RETRY_AFTER_FAILURE_MS;
      this.logger.warn(
        { event: 'secret_scanning_keys', detail: (error as Error).message, keptKeys: this.keys.size },
        'secret scanning: the signing keys could not be loaded',
      );
    }
  }

  private async read(): Promise<string> {
    if (this.source.kind === 'file') {
      const text = await readFile(this.source.path, 'utf8');
      if (text.length > MAX_KEY_SET_BYTES) throw new Error(`the key set file is larger than ${MAX_KEY_SET_BYTES} bytes`);
      return text;
    }
    const response = await fetch(this.source.url, {
      // GitHub's API refuses requests without a User-Agent.
      headers: { accept: 'application/json', 'user-agent': 'gateway-authz' },
      signal: AbortSignal.timeout(KEY_SET_FETCH_TIMEOUT_MS),
      redirect: 'error',
    });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`the key set URL answered HTTP ${response.status}`);
    }
    return readBounded(response);
  }
}

async function readBounded(response: Response): Promise<string> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop by the throw cancels the rest of the body.
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > MAX_KEY_SET_BYTES) throw new Error(`the key set is larger than ${MAX_KEY_SET_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Every usable P-256 key of the set by its identifier; throws when the text is not a key set or holds no usable key. */
export function parseKeySet(text: string): Map<string, KeyObject> {
  const parsed = JSON.parse(text) as { public_keys?: unknown };
  if (!Array.isArray(parsed?.public_keys)) throw new Error('the key set has no public_keys array');
  const keys = new Map<string, KeyObject>();
  for (const entry of parsed.public_keys as unknown[]) {
    const { key_identifier: id, key: pem } = (entry ?? {}) as { key_identifier?: unknown; key?: unknown };
    if (typeof id !== 'string' || id === '' || typeof pem !== 'string') continue;
    try {
      const key = createPublicKey(pem);
      if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') keys.set(id, key);
    } catch {
      // Not a PEM public key: skipped, as a key of another kind is.
    }
  }
  if (keys.size === 0) throw new Error('the key set holds no ECDSA P-256 public key');
  return keys;
}
