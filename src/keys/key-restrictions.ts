import { createHash } from 'node:crypto';
import { KEYED_FAMILIES, type KeyedFamily } from '../check/routes/route-table';
import { matchesModelPattern } from '../metering/price-table';
import { MAX_MODEL_NAME_LENGTH } from '../metering/requested-model';

/**
 * What a key may do, narrowed from "everything" (docs/concepts/key-restrictions.md). Each part left out restricts
 * nothing; a key with none behaves as one without restrictions. An account carries the same shape as the defaults
 * of all its keys: a request must pass both the account's and the key's, so a key can only narrow its account's.
 */
export interface KeyRestrictions {
  /**
   * Route families (`chat-completions`, `messages`, `generative-content`, `models`) or paths, exact or a prefix
   * ending in one `*` (the price table's model syntax): the request's path must match one.
   */
  endpoints?: readonly string[];
  /** Only reads: GET and HEAD (the model list, retrieving a stored response). */
  readOnly?: boolean;
  /** Model names, exact or a prefix ending in one `*`, as the price table writes them. */
  models?: readonly string[];
  /** CIDR ranges, IPv4 or IPv6, of the address Envoy reports for the caller. */
  sourceAddresses?: readonly string[];
}

/** What a refusal names as missing; never what is allowed. */
export type RestrictionKind = 'address' | 'endpoint' | 'model';

/** Enough for any real allow-list, small enough that a record stays a few KB and matching stays a short loop. */
export const MAX_RESTRICTION_ENTRIES = 64;
/** Paths and model patterns longer than this name nothing the upstreams serve. */
const MAX_PATTERN_LENGTH = MAX_MODEL_NAME_LENGTH;

const FIELDS = ['endpoints', 'readOnly', 'models', 'sourceAddresses'] as const;
type RestrictionField = (typeof FIELDS)[number];

/**
 * Why a value is not valid restrictions: the part at fault (none for the whole) and, in words an operator or customer
 * can act on, what is wrong with it. Neither names the restrictions themselves: a key's are `restrictions`, an
 * account's defaults `keyRestrictions`, and the APIs' field paths say which.
 */
export interface RestrictionsProblem {
  readonly field?: RestrictionField;
  readonly message: string;
}

/**
 * Why a value is not valid restrictions; undefined when it is. Every list must hold at least one entry: an empty list
 * would refuse everything, which revoking says better.
 */
export function restrictionsProblem(value: unknown): RestrictionsProblem | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { message: 'must be an object' };
  const record = value as Record<string, unknown>;
  const unknownField = Object.keys(record).find((field) => !(FIELDS as readonly string[]).includes(field));
  if (unknownField !== undefined) return { message: `has no field '${unknownField}' (known: ${FIELDS.join(', ')})` };
  if (record.readOnly !== undefined && typeof record.readOnly !== 'boolean') return { field: 'readOnly', message: 'must be true or false' };
  return (
    listProblem(record.endpoints, 'endpoints', endpointProblem) ??
    listProblem(record.models, 'models', modelPatternProblem) ??
    listProblem(record.sourceAddresses, 'sourceAddresses', cidrProblem)
  );
}

/** A problem in one line, its part named (`restrictions.sourceAddresses: …`). */
export function describeRestrictionsProblem(problem: RestrictionsProblem): string {
  return `${problem.field === undefined ? 'restrictions' : `restrictions.${problem.field}`}: ${problem.message}`;
}

function listProblem(
  value: unknown,
  field: Exclude<RestrictionField, 'readOnly'>,
  entryProblem: (entry: string) => string | undefined,
): RestrictionsProblem | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) return { field, message: 'must be a list' };
  if (value.length === 0) {
    return { field, message: 'must not be empty: it would refuse every request (leave it out to restrict nothing, or revoke the key)' };
  }
  if (value.length > MAX_RESTRICTION_ENTRIES) return { field, message: `must have at most ${MAX_RESTRICTION_ENTRIES} entries` };
  for (const entry of value as unknown[]) {
    if (typeof entry !== 'string') return { field, message: 'must hold strings' };
    const problem = entryProblem(entry);
    if (problem !== undefined) return { field, message: problem };
  }
  return undefined;
}

function patternProblem(pattern: string): string | undefined {
  if (pattern.length === 0 || pattern.length > MAX_PATTERN_LENGTH) return `a pattern has 1 to ${MAX_PATTERN_LENGTH} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(pattern)) return `'${pattern}' contains a space or a control character`;
  if (pattern.slice(0, -1).includes('*')) return `'${pattern}': '*' may only end a pattern (a prefix)`;
  return undefined;
}

function endpointProblem(entry: string): string | undefined {
  if ((KEYED_FAMILIES as readonly string[]).includes(entry)) return undefined;
  if (!entry.startsWith('/')) return `'${entry}' is neither a route family (${KEYED_FAMILIES.join(', ')}) nor a path starting with '/'`;
  return patternProblem(entry);
}

function modelPatternProblem(entry: string): string | undefined {
  return entry === '*' ? "'*' alone allows every model: leave models out instead" : patternProblem(entry);
}

function cidrProblem(entry: string): string | undefined {
  const range = parseCidr(entry);
  return typeof range === 'string' ? range : undefined;
}

/** The stored form, the same text in every store: '' for none. */
export function restrictionsText(restrictions: KeyRestrictions | undefined): string {
  return restrictions === undefined ? '' : JSON.stringify(restrictions);
}

/**
 * Bytes of SHA-256 a stamp keeps: 128 bits, so no one can find another text with a stamp they know (a second
 * preimage), nor two of their own that share one, and 22 characters, short enough that Redis holds the argument and
 * the field inline (an embedded string, up to 44 bytes) and Lua compares them cheaply.
 */
const STAMP_BYTES = 16;

/**
 * A short stand-in for a stored text, written beside it in the same step: what Check sends with every decision of a
 * restricted key, and the authorize script compares with the record's, instead of the whole texts (which cost Redis
 * and the service more per Check the longer they are: docs/concepts/key-restrictions.md). Equal texts have equal
 * stamps, so a text set again as it was needs no new decision; '' for none, as the text.
 */
export function restrictionsStamp(text: string): string {
  return text === '' ? '' : createHash('sha256').update(text).digest().subarray(0, STAMP_BYTES).toString('base64url');
}

/** A stored text back to restrictions; throws when it is not valid ones (a record written by something else). */
export function parseRestrictionsText(text: string): KeyRestrictions | undefined {
  if (text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('stored restrictions are not JSON');
  }
  const problem = restrictionsProblem(value);
  if (problem !== undefined) throw new Error(`stored restrictions are invalid: ${describeRestrictionsProblem(problem)}`);
  return value as KeyRestrictions;
}

/**
 * Why `key` names something `account` does not allow, for a caller who may only narrow the account's defaults (a
 * customer); undefined when every entry of the key's is inside one of the account's. A part the key leaves out is
 * no widening: the account's defaults apply to every request whatever the key says, so this keeps a key's own
 * restrictions truthful rather than enforcing them.
 */
export function wideningProblem(key: KeyRestrictions | undefined, account: KeyRestrictions | undefined): string | undefined {
  if (account === undefined || key === undefined) return undefined;
  const endpoints = listWithin(key?.endpoints, account.endpoints, endpointWithin);
  if (endpoints !== undefined) return `endpoints ${endpoints}`;
  const models = listWithin(key?.models, account.models, patternWithin);
  if (models !== undefined) return `models ${models}`;
  const addresses = listWithin(key?.sourceAddresses, account.sourceAddresses, cidrWithin);
  return addresses === undefined ? undefined : `sourceAddresses ${addresses}`;
}

function listWithin(
  key: readonly string[] | undefined,
  account: readonly string[] | undefined,
  within: (inner: string, outer: string) => boolean,
): string | undefined {
  if (account === undefined || key === undefined) return undefined;
  const wider = key.find((entry) => !account.some((outer) => within(entry, outer)));
  return wider === undefined ? undefined : `'${wider}' is outside the account's defaults`;
}

/** Whether every name `inner` matches is one `outer` matches. */
function patternWithin(inner: string, outer: string): boolean {
  if (!outer.endsWith('*')) return inner === outer;
  return inner.startsWith(outer.slice(0, -1));
}

function endpointWithin(inner: string, outer: string): boolean {
  if (inner === outer) return true;
  if ((KEYED_FAMILIES as readonly string[]).includes(outer) || (KEYED_FAMILIES as readonly string[]).includes(inner)) return false;
  return patternWithin(inner, outer);
}

function cidrWithin(inner: string, outer: string): boolean {
  const a = parseCidr(inner);
  const b = parseCidr(outer);
  return typeof a !== 'string' && typeof b !== 'string' && a.prefixBits >= b.prefixBits && inRange(a.network, b);
}

/** An address range: 16 bytes (IPv4 as IPv4-mapped IPv6, so one comparison serves both) and how many lead bits count. */
export interface AddressRange {
  network: Uint8Array;
  prefixBits: number;
}

/** `10.0.0.0/8`, `2001:db8::/32`; a bare address is its own /32 or /128. A string is what is wrong with it. */
export function parseCidr(text: string): AddressRange | string {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const v4 = IPV4.test(address);
  const network = address.includes('%') || address.startsWith('[') ? undefined : addressBytes(address);
  if (network === undefined) return `'${text}' is not a CIDR range: '${address}' is no IPv4 or IPv6 address`;
  const maxBits = v4 ? 32 : 128;
  const bitsText = slash < 0 ? String(maxBits) : text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(bitsText) || Number(bitsText) > maxBits) {
    return `'${text}' is not a CIDR range: the prefix length must be 0 to ${maxBits}`;
  }
  return { network, prefixBits: Number(bitsText) + (v4 ? 96 : 0) };
}

/** Whether an address (as addressBytes gives it) is inside a range. */
export function inRange(address: Uint8Array, range: AddressRange): boolean {
  const whole = range.prefixBits >>> 3;
  for (let i = 0; i < whole; i += 1) if (address[i] !== range.network[i]) return false;
  const rest = range.prefixBits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (address[whole]! & mask) === (range.network[whole]! & mask);
}

const IPV4 = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;
const HEX_WORD = /^[0-9A-Fa-f]{1,4}$/;

/**
 * A dotted-quad IPv4 address (what IPV4 accepts: four decimal octets, no leading zeros) mapped into 16 bytes;
 * undefined for anything else. By hand, in one pass, because a restricted key's every Check parses Envoy's
 * source address: the regular expression and the arrays it replaced took about 1 µs of a Check.
 */
function ipv4Bytes(text: string): Uint8Array | undefined {
  const bytes = new Uint8Array(16);
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  let octet = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code === 0x2e) {
      if (digits === 0 || octet === 3) return undefined;
      bytes[12 + octet] = value;
      octet += 1;
      value = 0;
      digits = 0;
    } else if (code >= 0x30 && code <= 0x39) {
      if (digits > 0 && value === 0) return undefined; // a leading zero
      value = value * 10 + (code - 0x30);
      digits += 1;
      if (value > 255) return undefined;
    } else {
      return undefined;
    }
  }
  if (octet !== 3 || digits === 0) return undefined;
  bytes[15] = value;
  return bytes;
}

/**
 * An IPv4 or IPv6 address as 16 bytes (IPv4 mapped into ::ffff:0:0/96); undefined when it is neither. Parsed here,
 * not with node:net, so the dashboards' type check (which has no Node types) can read the restriction types.
 */
export function addressBytes(text: string): Uint8Array | undefined {
  const bracketless = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v4 = ipv4Bytes(bracketless);
  if (v4 !== undefined) return v4;
  // A zone (fe80::1%eth0) names an interface, not another address.
  const address = bracketless.includes('%') ? bracketless.slice(0, bracketless.indexOf('%')) : bracketless;
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const wordsOf = (half: string): number[] | undefined => {
    if (half === '') return [];
    const parts = half.split(':');
    const words: number[] = [];
    for (const [i, part] of parts.entries()) {
      if (i === parts.length - 1 && IPV4.test(part)) {
        const [a, b, c, d] = part.split('.').map(Number) as [number, number, number, number];
        words.push((a << 8) | b, (c << 8) | d);
      } else if (HEX_WORD.test(part)) words.push(parseInt(part, 16));
      else return undefined;
    }
    return words;
  };
  const head = wordsOf(halves[0]!);
  const tail = halves.length === 2 ? wordsOf(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  // An IPv4 part may only end the address.
  if (halves.length === 2 && halves[0]!.includes('.')) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const words = [...head, ...Array<number>(missing).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  words.forEach((word, i) => {
    bytes[i * 2] = word >>> 8;
    bytes[i * 2 + 1] = word & 0xff;
  });
  return bytes;
}

/** Restrictions made ready to match on every Check: ranges parsed once, when they reach the replica. */
export interface CompiledRestrictions {
  readonly families: ReadonlySet<KeyedFamily> | undefined;
  readonly paths: readonly string[] | undefined;
  readonly readOnly: boolean;
  readonly models: readonly string[] | undefined;
  readonly ranges: readonly AddressRange[] | undefined;
}

export function compileRestrictions(restrictions: KeyRestrictions): CompiledRestrictions {
  const endpoints = restrictions.endpoints;
  return {
    families:
      endpoints && new Set(endpoints.filter((entry): entry is KeyedFamily => (KEYED_FAMILIES as readonly string[]).includes(entry))),
    paths: endpoints?.filter((entry) => entry.startsWith('/')),
    readOnly: restrictions.readOnly === true,
    models: restrictions.models,
    ranges: restrictions.sourceAddresses?.map((entry) => parseCidr(entry) as AddressRange),
  };
}

/** Whether a model name matches one of the patterns (the price table's own matcher). */
export function modelAllowed(patterns: readonly string[], model: string): boolean {
  return patterns.some((pattern) => matchesModelPattern(pattern, model));
}

/** Whether a path matches one of the path patterns (exact, or a prefix ending in `*`). */
export function pathAllowed(patterns: readonly string[], path: string): boolean {
  return patterns.some((pattern) => matchesModelPattern(pattern, path));
}
