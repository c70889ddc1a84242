import { isIPv6 } from 'node:net';
import type { AdminAuthLimits, AuthLimitKind } from './admin-auth-limits';
import type { Clock } from '../platform/clock';

export type AuthAdmission =
  { readonly admitted: true } | { readonly admitted: false; readonly limit: AuthLimitKind; readonly retryAfterMs: number };

export interface AdminAuthLimiterOptions {
  /** Addresses with a live failure window kept at most; the oldest window is dropped first. */
  readonly maxTrackedAddresses?: number;
  /** Addresses exempt from the total limit kept at most; the one whose exemption ends first is dropped first. */
  readonly maxTrustedAddresses?: number;
  /** How long an address that presented the right token stays exempt from the total limit. */
  readonly trustedForMs?: number;
}

export const DEFAULT_MAX_TRACKED_ADDRESSES = 10_000;
export const DEFAULT_MAX_TRUSTED_ADDRESSES = 1_000;
export const DEFAULT_TRUSTED_FOR_MS = 24 * 3_600_000;

interface FailureWindow {
  readonly startedAt: number;
  failures: number;
}

const ADMITTED: AuthAdmission = Object.freeze({ admitted: true });

/**
 * Limits admin token guessing. Every wrong token is counted against its
 * client address and against a total, each over a fixed window:
 *
 * - An address over its own limit is refused without its token being checked,
 *   so a right guess from it cannot reveal itself either.
 * - Over the total limit (a guessing attack spread over many addresses), only
 *   addresses that presented the right token within `trustedForMs` are still
 *   checked; an operator's usual address keeps working, a new one waits.
 *
 * Both tables are bounded, so an attack from very many addresses cannot grow
 * memory. A window is dropped early only when the table is full of live ones,
 * which the total limit prevents: once it is reached only trusted addresses
 * are checked, so at most 2 × failuresTotal untrusted addresses (two fixed
 * total windows) plus the trusted ones fail within one window length; the
 * settings keep that below DEFAULT_MAX_TRACKED_ADDRESSES.
 *
 * The caller checks `admit` and records the outcome in the same synchronous
 * step, so parallel requests cannot all pass before the first is counted.
 * Time is integer milliseconds from the injected clock.
 */
export class AdminAuthLimiter {
  /** In window-start order (a restarted window is re-inserted), so expired windows sit at the front. */
  private readonly windows = new Map<string, FailureWindow>();
  /** Address → when its exemption from the total limit ends, in that order. */
  private readonly trustedUntil = new Map<string, number>();
  private total: FailureWindow | undefined;
  private readonly maxTrackedAddresses: number;
  private readonly maxTrustedAddresses: number;
  private readonly trustedForMs: number;

  constructor(
    private readonly limits: AdminAuthLimits,
    private readonly clock: Clock,
    options: AdminAuthLimiterOptions = {},
  ) {
    this.maxTrackedAddresses = options.maxTrackedAddresses ?? DEFAULT_MAX_TRACKED_ADDRESSES;
    this.maxTrustedAddresses = options.maxTrustedAddresses ?? DEFAULT_MAX_TRUSTED_ADDRESSES;
    this.trustedForMs = options.trustedForMs ?? DEFAULT_TRUSTED_FOR_MS;
    const sizes = { ...limits, maxTrackedAddresses: this.maxTrackedAddresses, maxTrustedAddresses: this.maxTrustedAddresses };
    for (const [name, value] of Object.entries(sizes)) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(`AdminAuthLimiter: ${name} must be a positive integer, got ${value}`);
      }
    }
  }

  /** Whether a request from `address` may have its token checked now. */
  admit(address: string): AuthAdmission {
    const now = this.clock.now();
    const own = this.liveWindow(this.windows.get(address), now);
    if (own && own.failures >= this.limits.failuresPerAddress) return this.refusal('address', own, now);
    const total = this.liveWindow(this.total, now);
    if (total && total.failures >= this.limits.failuresTotal && !this.isTrusted(address, now)) return this.refusal('total', total, now);
    return ADMITTED;
  }

  /**
   * Counts a wrong token from `address`. Returns the limits this very failure
   * reached (usually none), so the caller logs once per window rather than per request.
   */
  recordFailure(address: string): AuthLimitKind[] {
    const now = this.clock.now();
    let own = this.liveWindow(this.windows.get(address), now);
    if (!own) {
      own = { startedAt: now, failures: 0 };
      this.windows.delete(address);
      this.makeRoomForOneMore(now);
      this.windows.set(address, own);
    }
    own.failures += 1;
    let total = this.liveWindow(this.total, now);
    if (!total) total = this.total = { startedAt: now, failures: 0 };
    total.failures += 1;
    const reached: AuthLimitKind[] = [];
    if (own.failures === this.limits.failuresPerAddress) reached.push('address');
    if (total.failures === this.limits.failuresTotal) reached.push('total');
    return reached;
  }

  /**
   * Takes back one failure recorded by `recordFailure` in the same window:
   * a token that needs a store lookup is counted as a failure before it
   * (so parallel guesses are all counted), and forgiven when it was right.
   */
  forgiveFailure(address: string): void {
    const now = this.clock.now();
    const own = this.liveWindow(this.windows.get(address), now);
    if (own && own.failures > 0) own.failures -= 1;
    const total = this.liveWindow(this.total, now);
    if (total && total.failures > 0) total.failures -= 1;
  }

  /** The right token from `address`: it stays exempt from the total limit for `trustedForMs`. */
  recordSuccess(address: string): void {
    const now = this.clock.now();
    this.trustedUntil.delete(address);
    this.trustedUntil.set(address, now + this.trustedForMs);
    for (const [oldest, until] of this.trustedUntil) {
      if (this.trustedUntil.size <= this.maxTrustedAddresses && until > now) break;
      this.trustedUntil.delete(oldest);
    }
  }

  /** Addresses with a failure window held in memory (bounded by maxTrackedAddresses). */
  get trackedAddresses(): number {
    return this.windows.size;
  }

  /** Addresses exempt from the total limit held in memory (bounded by maxTrustedAddresses). */
  get trustedAddresses(): number {
    return this.trustedUntil.size;
  }

  private refusal(limit: AuthLimitKind, window: FailureWindow, now: number): AuthAdmission {
    return { admitted: false, limit, retryAfterMs: window.startedAt + this.limits.windowMs - now };
  }

  private isTrusted(address: string, now: number): boolean {
    const until = this.trustedUntil.get(address);
    return until !== undefined && until > now;
  }

  /** A window that still counts; a clock that went backwards ends it too, so no lockout outlasts its window. */
  private liveWindow(window: FailureWindow | undefined, now: number): FailureWindow | undefined {
    if (!window) return undefined;
    return now >= window.startedAt && now - window.startedAt < this.limits.windowMs ? window : undefined;
  }

  /** Drops expired windows from the front, then the oldest live one if the table is still full. */
  private makeRoomForOneMore(now: number): void {
    for (const [address, window] of this.windows) {
      if (this.windows.size < this.maxTrackedAddresses && this.liveWindow(window, now)) break;
      this.windows.delete(address);
    }
  }
}

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * The key a client is limited by: an IPv4 address as is (also when it arrives
 * IPv4-mapped), an IPv6 address by its /64, since one IPv6 host usually holds
 * a whole /64 and could otherwise take a fresh address for every guess.
 */
export function clientAddressKey(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined || remoteAddress === '') return 'unknown';
  const mapped = IPV4_MAPPED.exec(remoteAddress);
  if (mapped) return mapped[1]!;
  const address = remoteAddress.replace(/%.*$/, '');
  if (!isIPv6(address)) return address;
  const [head = '', tail] = address.split('::');
  const groupsIn = (part: string | undefined) => (part ? part.split(':') : []);
  const width = (groups: string[]) => groups.reduce((sum, group) => sum + (group.includes('.') ? 2 : 1), 0);
  const before = groupsIn(head);
  const after = groupsIn(tail);
  const zeros = tail === undefined ? [] : new Array<string>(8 - width(before) - width(after)).fill('0');
  const groups = [...before, ...zeros, ...after];
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
