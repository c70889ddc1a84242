import type { CliSettings } from '../platform/settings';

/** A non-2xx answer of the admin API, as the API named it. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'AdminApiError';
  }

  /** `account_not_found: No account 'x'.`: what the CLI prints after `error: `. */
  describe(): string {
    return `${this.code}: ${this.message}`;
  }
}

/** The admin API could not be reached or sent no answer: a write may or may not have been applied. */
export class AdminUnreachableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdminUnreachableError';
  }
}

/** Keeps a non-JSON answer (a proxy's HTML error page, say) to one short line. */
function excerpt(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

function errorFrom(status: number, statusText: string, text: string): AdminApiError {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; field?: unknown } };
    const { code, message, field } = body.error ?? {};
    if (typeof code === 'string' && typeof message === 'string') {
      return new AdminApiError(status, code, message, typeof field === 'string' ? field : undefined);
    }
  } catch {
    // not JSON: described below
  }
  return new AdminApiError(status, `http_${status}`, excerpt(text) || statusText || 'the admin API answered with an error');
}

/** A 2xx answer of the admin API: its parsed JSON and its headers (`idempotent-replayed`, say). */
export interface AdminAnswer<T> {
  body: T;
  headers: Headers;
}

/**
 * Calls the admin API and answers its parsed JSON with the response's
 * headers. A non-2xx answer throws AdminApiError with the API's code and
 * message, an unreachable API AdminUnreachableError, a missing token a plain Error.
 * Printing is the caller's business.
 */
export async function adminExchange<T>(
  settings: CliSettings,
  method: string,
  path: string,
  body?: object,
  headers: Readonly<Record<string, string>> = {},
): Promise<AdminAnswer<T>> {
  if (!settings.adminToken) {
    throw new Error('No operator token: set OPERATOR_TOKEN, or OPERATOR_TOKEN_FILE to a file holding it (or the break-glass ADMIN_TOKEN)');
  }
  let response: Response;
  try {
    response = await fetch(new URL(path, settings.adminUrl), {
      method,
      headers: {
        ...headers,
        authorization: `Bearer ${settings.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    // fetch says only "fetch failed"; the cause says why (ECONNREFUSED, ENOTFOUND, …).
    const cause = (error as Error & { cause?: { code?: unknown; message?: unknown } }).cause;
    const why =
      typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (error as Error).message;
    throw new AdminUnreachableError(`cannot reach the admin API at ${settings.adminUrl}: ${why}`);
  }
  const text = await response.text();
  if (!response.ok) throw errorFrom(response.status, response.statusText, text);
  try {
    return { body: JSON.parse(text) as T, headers: response.headers };
  } catch {
    throw new Error(`the admin API answered ${response.status} with something that is not JSON: ${excerpt(text)}`);
  }
}
