import { InvalidArgumentError } from 'commander';
import { MAX_WINDOW_SECONDS, describeWindow, parseWindow } from '../limits/rate-limit';

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
    throw new InvalidArgumentError('must be a whole number of minor units, such as 5000 or -250');
  }
  return parsed;
}

export function nonZeroIntegerOption(value: string): number {
  const parsed = integerOption(value);
  if (parsed === 0) throw new InvalidArgumentError('must not be zero (positive adds credit, negative debits it)');
  return parsed;
}

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
