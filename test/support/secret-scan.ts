import { createHash } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTick } from 'node:timers';

/**
 * Suite-wide secret hygiene. Everything a test sees come out of a server
 * under test is appended to files in one directory per jest run, one file
 * per source and process:
 *
 * - `logs-*`: every log line (in-process apps and server processes);
 * - `metrics-*`: every /metrics body a test fetched, plus a final scrape when
 *   the test support closes an app or stops a server process;
 * - `admin-*`: every other admin API response body (create/rotate key
 *   answers with their `key` field masked: the one place a full key belongs);
 * - `audit-*`: GET /admin/audit, fetched when an app with a token is closed;
 * - `bodies-*`: every CheckResponse (deny bodies and headers, allow headers)
 *   and Check error a test received through the official Envoy client.
 *
 * Every secret any test makes (customer keys, provider-shaped keys, the admin
 * token) goes to `secrets-*`; the global teardown scans all of it for each
 * secret and its SHA-256 hex. So "no full key anywhere" is checked over the
 * whole suite's traffic, not one file's.
 */
export const CAPTURE_DIR_ENV = 'GATEWAY_AUTHZ_TEST_CAPTURE_DIR';

export const CAPTURE_SOURCES = ['logs', 'metrics', 'admin', 'audit', 'bodies'] as const;
export type CaptureSource = (typeof CAPTURE_SOURCES)[number];

/** A single recorded item is cut to this many characters. */
export const MAX_ITEM_CHARS = 64 * 1024;

/** What a create-key or rotate-key answer's `key` field is recorded as. */
export const CREATED_KEY_MASK = '[created-key]';

function captureDir(): string | undefined {
  return process.env[CAPTURE_DIR_ENV] || undefined;
}

/**
 * Appends are batched per file and written once per event-loop turn (or at
 * 256 KiB), so a flood of Check calls costs a few writes, not one per item.
 * The flush uses node:timers' setImmediate, which jest's fake timers leave alone.
 */
const pending = new Map<string, string>();
let flushScheduled = false;

function append(path: string, text: string): void {
  const buffered = (pending.get(path) ?? '') + text;
  pending.set(path, buffered);
  if (buffered.length > 256 * 1024) flushCaptures();
  else if (!flushScheduled) {
    flushScheduled = true;
    nextTick(flushCaptures);
  }
}

/** Writes everything recorded so far in this process. */
export function flushCaptures(): void {
  flushScheduled = false;
  for (const [path, text] of pending) {
    pending.delete(path);
    try {
      appendFileSync(path, text);
    } catch {
      // The run's directory is gone (teardown already ran): nothing left to scan it.
    }
  }
}

export function recordLogLine(line: string): void {
  const dir = captureDir();
  if (dir) append(join(dir, `logs-${process.pid}.ndjson`), line.endsWith('\n') ? line : `${line}\n`);
}

/**
 * One captured item (not a log line): a JSON line `{what, text}` in the
 * source's file. `what` says where it came from (method and path, never a
 * request's own data); `text` is cut to MAX_ITEM_CHARS.
 */
export function recordCapture(source: Exclude<CaptureSource, 'logs'>, what: string, text: string): void {
  const dir = captureDir();
  if (!dir) return;
  const item = { what, text: text.length > MAX_ITEM_CHARS ? text.slice(0, MAX_ITEM_CHARS) : text };
  append(join(dir, `${source}-${process.pid}.ndjson`), `${JSON.stringify(item)}\n`);
}

export function registerSecrets(...secrets: string[]): void {
  const dir = captureDir();
  // Few and precious: written at once, not batched.
  if (dir && secrets.length > 0) appendFileSync(join(dir, `secrets-${process.pid}.txt`), `${secrets.join('\n')}\n`);
}

/**
 * POST /admin/accounts/:id/keys and POST /admin/keys/:keyId/rotate, and the customer API's
 * POST /api/accounts/:id/keys and POST /api/accounts/:id/keys/:keyId/regenerate: the only answers that carry a full key.
 */
export function isKeyMintingCall(method: string, path: string): boolean {
  const bare = path.split('?')[0] ?? '';
  return (
    method.toUpperCase() === 'POST' &&
    (/^\/admin\/accounts\/[^/]+\/keys$/.test(bare) ||
      /^\/admin\/keys\/[^/]+\/rotate$/.test(bare) ||
      /^\/api\/accounts\/[^/]+\/keys$/.test(bare) ||
      /^\/api\/accounts\/[^/]+\/keys\/[^/]+\/regenerate$/.test(bare))
  );
}

/** The path with every non-literal segment (ids, and any key a test sends) replaced by `:id`. */
export function routeShape(path: string): string {
  return path
    .split('/')
    .map((segment) => (segment === '' || /^[a-z][a-z-]*$/.test(segment) ? segment : ':id'))
    .join('/');
}

/**
 * Records one admin API response. For a key-minting call, the top-level `key`
 * field is replaced by CREATED_KEY_MASK (the rest of the body is still
 * scanned) and the key is registered as a secret. Returns the minted key, if any.
 */
export function recordAdminResponse(method: string, path: string, status: number, text: string): string | undefined {
  const bare = path.split('?')[0] ?? '';
  const what = `${method.toUpperCase()} ${routeShape(bare)} ${status}`;
  const source = bare === '/metrics' ? 'metrics' : bare === '/admin/audit' ? 'audit' : 'admin';
  let recorded = text;
  let minted: string | undefined;
  if (isKeyMintingCall(method, bare)) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && typeof (parsed as { key?: unknown }).key === 'string') {
        minted = (parsed as { key: string }).key;
        recorded = JSON.stringify({ ...parsed, key: CREATED_KEY_MASK });
      }
    } catch {
      // Not JSON: recorded as is.
    }
  }
  if (method.toUpperCase() === 'POST' && bare === '/admin/operator-tokens') {
    // The one answer that carries an operator token: masked like a created key, and the token joins the scan.
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && typeof (parsed as { token?: unknown }).token === 'string') {
        registerSecrets((parsed as { token: string }).token);
        recorded = JSON.stringify({ ...parsed, token: CREATED_KEY_MASK });
      }
    } catch {
      // Not JSON: recorded as is.
    }
  }
  if (minted !== undefined) registerSecrets(minted);
  recordCapture(source, what, recorded);
  return minted;
}

const FETCH_STATE = Symbol.for('gateway-authz.test.capture-fetch');
interface FetchState {
  original: typeof fetch;
  bases: Set<string>;
}

function fetchState(): FetchState {
  const holder = globalThis as unknown as { [FETCH_STATE]?: FetchState };
  let state = holder[FETCH_STATE];
  if (!state) {
    const original = globalThis.fetch;
    state = { original, bases: new Set() };
    const bases = state.bases;
    const wrapped = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): Promise<Response> => {
      const response = await original(input, init);
      try {
        const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
        if (bases.has(url.origin)) {
          const method = init?.method ?? (typeof input === 'object' && 'method' in input ? input.method : 'GET');
          recordAdminResponse(method, url.pathname + url.search, response.status, await response.clone().text());
        }
      } catch {
        // Recording is best effort; the caller still gets its response.
      }
      return response;
    };
    globalThis.fetch = wrapped;
    holder[FETCH_STATE] = state;
  }
  return state;
}

/**
 * From now on, every response the tests of this file fetch from the admin
 * API at `adminUrl` (with the global fetch) is recorded: /metrics as
 * metrics, /admin/audit as audit, anything else as admin.
 */
export function captureAdminResponses(adminUrl: string): void {
  fetchState().bases.add(new URL(adminUrl).origin);
}

/**
 * Best effort, bounded by `timeoutMs` per request: a final /metrics scrape
 * and, with a token, the whole audit log. Never throws; a server that is
 * already gone just records nothing.
 */
export async function captureFinalState(adminUrl: string, adminToken: string | undefined, timeoutMs = 2000): Promise<void> {
  if (!captureDir()) return;
  const get = fetchState().original;
  const read = async (path: string, headers: Record<string, string> = {}) => {
    const response = await get(`${adminUrl}${path}`, { headers, signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, text: await response.text() };
  };
  try {
    const metrics = await read('/metrics');
    recordCapture('metrics', `final GET /metrics ${metrics.status}`, metrics.text);
  } catch {
    // gone or slow: nothing to scrape
  }
  if (!adminToken) return;
  try {
    let before: string | null = null;
    for (let page = 0; page < 20; page += 1) {
      const query: string = `/admin/audit?limit=1000${before ? `&before=${encodeURIComponent(before)}` : ''}`;
      const audit = await read(query, { authorization: `Bearer ${adminToken}` });
      recordCapture('audit', `final GET /admin/audit ${audit.status}`, audit.text);
      if (audit.status !== 200) break;
      before = (JSON.parse(audit.text) as { next?: string | null }).next ?? null;
      if (!before) break;
    }
  } catch {
    // gone, slow or store down: what was read is recorded
  }
  flushCaptures();
}

export interface Leak {
  file: string;
  /** logs, metrics, admin, audit or bodies: from the file name. */
  source: string;
  secretStart: string;
  kind: 'secret' | 'sha256 of secret';
}

export function sourceOfFile(file: string): string {
  return file.split('-')[0] ?? file;
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
      .map(({ secret, kind }) => ({ file: line.file, source: sourceOfFile(line.file), secretStart: secret.slice(0, 6), kind })),
  );
}

/** A captured item's scanned text: its label and its decoded text (so JSON escaping cannot hide a secret). */
function itemText(line: string): string {
  try {
    const item = JSON.parse(line) as { what?: unknown; text?: unknown };
    return `${String(item.what)}\n${String(item.text)}`;
  } catch {
    return line;
  }
}

export function scanCaptureDir(dir: string): {
  lines: number;
  counts: Record<CaptureSource, number>;
  secrets: number;
  leaks: Leak[];
} {
  flushCaptures();
  const files = readdirSync(dir);
  const secrets = [
    ...new Set(
      files
        .filter((file) => file.startsWith('secrets-'))
        .flatMap((file) => readFileSync(join(dir, file), 'utf8').split('\n'))
        .filter((secret) => secret.length >= 8),
    ),
  ];
  const counts = Object.fromEntries(CAPTURE_SOURCES.map((source) => [source, 0])) as Record<CaptureSource, number>;
  const items = files
    .filter((file) => (CAPTURE_SOURCES as readonly string[]).includes(sourceOfFile(file)))
    .flatMap((file) => {
      const source = sourceOfFile(file) as CaptureSource;
      const texts = readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter((text) => text !== '');
      counts[source] += texts.length;
      // A log line is scanned raw (as written); other items as their decoded text.
      return texts.map((text) => ({ file, text: source === 'logs' ? text : itemText(text) }));
    });
  return { lines: items.length, counts, secrets: secrets.length, leaks: findLeaks(items, secrets) };
}
