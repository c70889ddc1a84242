import { InvalidArgumentError } from 'commander';
import { addressBytes } from '../keys/key-restrictions';
import { MAX_ACTIVE_KEYS_LIMIT } from '../keys/active-key-cap';
import { idempotencyKeyProblem } from '../accounts/credit';
import { MEMBER_ROLES, type MemberRole } from '../accounts/customer-identity';
import { emailProblem, issuerProblem, normalizeEmail, subjectProblem } from '../accounts/members';
import { MAX_WINDOW_SECONDS, describeWindow, parseWindow } from '../accounts/limits/rate-limit';

/**
 * Option parsers for the CLI. They refuse bad input before any call to the
 * admin API, naming what is wrong; the API checks everything again.
 */

export const MAX_CLI_LIMIT = 1_000_000_000;

/** A whole number of minor units (may be negative), e.g. `--credit-balance -250`. */
export function integerOption(value: string): number {
  const trimmed = value.trim();
  const parsed = Number(trimmed);
  if (!/^[-+]?\d+$/.test(trimmed) || !Number.isSafeInteger(parsed)) {
    throw new InvalidArgumentError(
      'must be a whole number of units (10^-exponent of the currency: micro-dollars by default), such as 5000000 or -250',
    );
  }
  return parsed;
}

/** `check --deadline`: seconds, whole or decimal, from 0.1 to 120; answers milliseconds. */
export function deadlineSecondsOption(value: string): number {
  const trimmed = value.trim();
  const milliseconds = Math.round(Number(trimmed) * 1000);
  if (!/^\d+(\.\d+)?$/.test(trimmed) || milliseconds < 100 || milliseconds > 120_000) {
    throw new InvalidArgumentError('must be a number of seconds from 0.1 to 120, such as 2 or 0.5');
  }
  return milliseconds;
}

/** A monthly spend cap: a whole number of minor units from 1 to 10^15. */
export function spendCapOption(value: string): number {
  const parsed = integerOption(value);
  if (parsed < 1 || parsed > 1_000_000_000_000_000)
    throw new InvalidArgumentError(
      'must be a whole number of units (10^-exponent of the currency: micro-dollars by default) from 1 to 10^15',
    );
  return parsed;
}

/** What the admin API takes for one token budget. */
export interface TokenBudgetArgument {
  tokens: number;
  window: string | number;
}

/** `"100000/1m,5000000/1d"` → token budgets: written and checked like limits (TOKENS/WINDOW). */
export function parseTokenBudgetList(text: string): TokenBudgetArgument[] {
  return parseLimitList(text).map(({ limit, window }) => ({ tokens: limit, window }));
}

export function nonZeroIntegerOption(value: string): number {
  const parsed = integerOption(value);
  if (parsed === 0) throw new InvalidArgumentError('must not be zero (positive adds credit, negative debits it)');
  return parsed;
}

/** `--idempotency-key`: a key the admin API accepts, checked before the call. */
export function idempotencyKeyOption(value: string): string {
  const problem = idempotencyKeyProblem(value);
  if (problem !== undefined) throw new InvalidArgumentError(`the key ${problem}`);
  return value;
}

export function environmentOption(value: string): 'live' | 'test' {
  if (value !== 'live' && value !== 'test') throw new InvalidArgumentError("must be 'live' or 'test'");
  return value;
}

export function maxActiveKeysOption(value: string): number {
  const trimmed = value.trim();
  if (!/^\d+$/.test(trimmed) || Number(trimmed) > MAX_ACTIVE_KEYS_LIMIT) {
    throw new InvalidArgumentError(`must be a whole number of keys from 0 to ${MAX_ACTIVE_KEYS_LIMIT}`);
  }
  return Number(trimmed);
}

export function memberRoleOption(value: string): MemberRole {
  if (!(MEMBER_ROLES as readonly string[]).includes(value)) throw new InvalidArgumentError(`must be one of: ${MEMBER_ROLES.join(', ')}`);
  return value as MemberRole;
}

/** The API checks these again; refusing here names the problem before any call. */
const checked = (problem: (text: string) => string | undefined, normalize: (text: string) => string = (text) => text) => {
  return (value: string): string => {
    const text = normalize(value);
    const found = problem(text);
    if (found) throw new InvalidArgumentError(found);
    return text;
  };
};
export const emailOption = checked(emailProblem, normalizeEmail);
export const issuerOption = checked(issuerProblem);
export const subjectOption = checked(subjectProblem);

export function accountStatusOption(value: string): 'active' | 'suspended' {
  if (value !== 'active' && value !== 'suspended') throw new InvalidArgumentError("must be 'active' or 'suspended'");
  return value;
}

/** What the admin API takes for one limit; the window is sent as written (`"1m"`) or as seconds. */
export interface LimitArgument {
  limit: number;
  window: string | number;
}

/**
 * `"100/1m,10000/1d"` → `[{limit:100,window:"1m"},{limit:10000,window:"1d"}]`.
 * A window is `30s`, `1m`, `1h`, `1d` or a whole number of seconds.
 */
export function parseLimitList(text: string): LimitArgument[] {
  const entries = text.split(',').map((entry) => entry.trim());
  if (entries.every((entry) => entry === '')) {
    throw new InvalidArgumentError('give at least one limit such as "100/1m,10000/1d" (use the --clear option to remove limits)');
  }
  const seen = new Map<number, string>();
  return entries.map((entry, index) => {
    const where = `limit ${index + 1} ('${entry}')`;
    const match = /^(\S+?)\s*\/\s*(\S+)$/.exec(entry);
    if (!match) throw new InvalidArgumentError(`${where} must be written LIMIT/WINDOW, such as 100/1m`);
    const [, limitText, windowText] = match as unknown as [string, string, string];
    const limit = Number(limitText);
    if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_CLI_LIMIT) {
      throw new InvalidArgumentError(`${where}: the limit must be a whole number from 1 to ${MAX_CLI_LIMIT}`);
    }
    const window: string | number = /^\d+$/.test(windowText) ? Number(windowText) : windowText;
    const seconds = parseWindow(window);
    if (seconds === undefined) {
      throw new InvalidArgumentError(
        `${where}: the window must be such as 30s, 1m, 1h, 1d or a whole number of seconds, at most ${describeWindow(MAX_WINDOW_SECONDS)}`,
      );
    }
    const earlier = seen.get(seconds);
    if (earlier !== undefined) {
      throw new InvalidArgumentError(`${where} repeats the window of '${earlier}'; give each window once`);
    }
    seen.set(seconds, entry);
    return { limit, window };
  });
}

/** The longest grace period a rotated key may keep working: 7 days (the admin API's limit too). */
export const MAX_GRACE_SECONDS = 7 * 86_400;

/**
 * `0`, `30s`, `15m`, `1h`, `24h`, `7d` or a whole number of seconds → seconds;
 * undefined for anything else (negative, fractional, unknown unit, empty).
 * The same spelling as limit windows, plus 0.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^0+[smhd]?$/.test(trimmed)) return 0;
  return parseWindow(/^\d+$/.test(trimmed) ? Number(trimmed) : trimmed);
}

/** `0` → `0s`, `3600` → `1h`, `90` → `90s`, `5400` → `90m`: the largest unit that divides evenly. */
export function describeDuration(seconds: number): string {
  return seconds === 0 ? '0s' : describeWindow(seconds);
}

/** `--grace`: how long the old key keeps working after a rotation, 0 (immediately refused) to 7d. */
export function graceOption(value: string): number {
  const seconds = parseDuration(value);
  if (seconds === undefined) {
    throw new InvalidArgumentError(
      'must be 0 (refuse the old key now), a duration such as 30s, 15m, 1h, 24h or 7d, or a whole number of seconds',
    );
  }
  if (seconds > MAX_GRACE_SECONDS) {
    throw new InvalidArgumentError(`must be at most 7d (${MAX_GRACE_SECONDS} seconds)`);
  }
  return seconds;
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/i;

/** True when the year, month and day name a real day (the Date constructor rolls 2026-02-30 over to March). */
function isCalendarDay(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * `--expires-at`: an ISO 8601 date (`2026-01-31`, midnight UTC) or date and
 * time with a zone (`2026-01-31T18:00:00Z`, `…+02:00`), sent to the API in
 * UTC (`2026-01-31T16:00:00.000Z`). A time without a zone is refused: whose
 * 18:00 would it be?
 */
export function isoTimeOption(value: string): string {
  const text = value.trim();
  const match = ISO_TIME.exec(text);
  const problem = 'must be an ISO 8601 date, or date and time with a zone, such as 2026-01-31 or 2026-01-31T18:00:00Z';
  if (!match) throw new InvalidArgumentError(problem);
  const [, year, month, day, hour, minute, second] = match;
  if (!isCalendarDay(Number(year), Number(month), Number(day))) {
    throw new InvalidArgumentError(`${year}-${month}-${day} is not a day of the calendar`);
  }
  if (hour !== undefined && (Number(hour) > 23 || Number(minute) > 59 || Number(second ?? 0) > 59)) {
    throw new InvalidArgumentError(`${text.slice(11)} is not a time of day`);
  }
  const time = new Date(hour === undefined ? `${text}T00:00:00Z` : text.toUpperCase());
  if (Number.isNaN(time.getTime())) throw new InvalidArgumentError(problem);
  return time.toISOString();
}

/** One `-H 'name: value'` of `gateway-authz check`, the name lower-cased as Envoy sends it. */
export interface HeaderLine {
  name: string;
  value: string;
}

/** RFC 9110 token characters: what a header name may be made of. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Control characters other than tab (CR, LF, NUL, …) cannot travel in a header value. */
function hasControlCharacter(value: string): boolean {
  return [...value].some((char) => {
    const code = char.charCodeAt(0);
    return (code < 0x20 && char !== '\t') || code === 0x7f;
  });
}

/**
 * `-H 'Authorization: Bearer gk_live_…'` → `{name: 'authorization', value: 'Bearer gk_live_…'}`, as curl
 * takes it: the value is trimmed and may be empty. Repeatable: each line is added to the earlier ones.
 */
export function headerLineOption(line: string, previous: readonly HeaderLine[] = []): HeaderLine[] {
  const colon = line.indexOf(':');
  if (colon < 0) throw new InvalidArgumentError("must be written 'name: value', such as 'authorization: Bearer gk_live_…'");
  const name = line.slice(0, colon).trim();
  if (name === '') {
    throw new InvalidArgumentError(
      "has no header name before ':' (pseudo-headers such as :authority are set from the path, -X and a 'host' header)",
    );
  }
  if (!HEADER_NAME.test(name)) {
    throw new InvalidArgumentError(`'${name}' is not a header name: use letters, digits and !#$%&'*+-.^_\`|~ only`);
  }
  const value = line.slice(colon + 1).trim();
  if (hasControlCharacter(value)) {
    throw new InvalidArgumentError(`the value of '${name}' holds a control character (CR, LF, NUL, …), which no HTTP request can carry`);
  }
  return [...previous, { name: name.toLowerCase(), value }];
}

/** The methods an HTTP request to the gateway can have. */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'] as const;

/** `-X post` → `POST`; anything but a known HTTP method is refused. */
export function httpMethodOption(value: string): string {
  const method = value.trim().toUpperCase();
  if (!(HTTP_METHODS as readonly string[]).includes(method)) {
    throw new InvalidArgumentError(`must be one of ${HTTP_METHODS.join(', ')}`);
  }
  return method;
}

/**
 * The request target as Envoy passes it on: a path starting with `/`, with its query string, in visible
 * ASCII (other characters are percent-encoded by any HTTP client before they are sent).
 */
export function requestPathOption(value: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new InvalidArgumentError("must be the path only, such as /v1/models (the host goes in -H 'host: …')");
  }
  if (!value.startsWith('/')) throw new InvalidArgumentError('must start with /, such as /v1/chat/completions');
  if (!/^[\u0021-\u007e]+$/.test(value)) {
    throw new InvalidArgumentError('must be visible ASCII without spaces: percent-encode other characters (a space is %20)');
  }
  if (value.includes('#')) throw new InvalidArgumentError('must not hold a fragment (#…): clients never send one to the server');
  return value;
}

/** `--grpc-url`: `host:port` of a gateway-authz gRPC listener, such as `127.0.0.1:9191` or `[::1]:9191`. */
export function grpcTargetOption(value: string): string {
  const text = value.trim();
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    throw new InvalidArgumentError('must be host:port without a scheme, such as 127.0.0.1:9191 (the call is plaintext gRPC)');
  }
  const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (!match || port < 1 || port > 65535) {
    throw new InvalidArgumentError('must be host:port with a port from 1 to 65535, such as 127.0.0.1:9191');
  }
  return text;
}

/** `--request-id`: what Envoy would send as x-request-id; 1 to 200 visible ASCII characters. */
export function requestIdOption(value: string): string {
  if (!/^[\u0021-\u007e]{1,200}$/.test(value)) {
    throw new InvalidArgumentError('must be 1 to 200 visible ASCII characters, such as a UUID');
  }
  return value;
}

/** An IPv4 or IPv6 address, as Envoy reports a client's. */
export function sourceAddressOption(value: string): string {
  if (addressBytes(value) === undefined) throw new InvalidArgumentError('must be an IPv4 or IPv6 address, such as 10.1.2.3 or 2001:db8::1');
  return value;
}

/** `a,b, c` → ['a', 'b', 'c']: the entries of a restriction list (validated by the API, with its words). */
export function commaListOption(value: string): string[] {
  const entries = value.split(',').map((entry) => entry.trim());
  if (entries.some((entry) => entry === '')) throw new InvalidArgumentError('must be a comma-separated list without empty entries');
  return entries;
}
