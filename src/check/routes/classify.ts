import type { GatedRouteFamily, RouteFamily } from './route';
import type { RouteTable } from './route-table';

/** Envoy passes the request target undecoded with its query; routes match on the path alone. */
export function splitPathAndQuery(target: string): { path: string; query: string } {
  const hash = target.indexOf('#');
  const withoutFragment = hash === -1 ? target : target.slice(0, hash);
  const mark = withoutFragment.indexOf('?');
  return mark === -1
    ? { path: withoutFragment, query: '' }
    : { path: withoutFragment.slice(0, mark), query: withoutFragment.slice(mark + 1) };
}

/**
 * A path that a proxy or upstream could read differently from us (dot
 * segments, doubled or encoded slashes, backslashes, `;` path parameters as
 * in `/..;/`, double encoding). Such a path is never
 * treated as public, so a trick cannot turn a keyed route into a free one.
 */
export function isCanonicalPath(path: string): boolean {
  if (!path.startsWith('/')) return false;
  if (path.includes('//') || path.includes('\\') || path.includes(';')) return false;
  // Encoded slash, backslash or dot, and any double encoding (%25…).
  if (/%(2f|5c|2e|25)/i.test(path)) return false;
  return !path.split('/').some((segment) => segment === '.' || segment === '..');
}

/** Anything that could make a path differ from its routing form: an escape, `//`, a dot segment, a trailing slash. */
const MAYBE_NOT_ROUTING_FORM = /%|\/\/|\/\.|.\/$/;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * The path as the upstream will act on it, for choosing a family: escapes of
 * unreserved characters decoded (RFC 3986 §6.2.2.2; `%2F` and other reserved
 * escapes stay), slashes merged, dot segments resolved, a trailing slash
 * dropped. envoy.yaml forwards `/v1/messages/` (path_separated_prefix) and
 * `/v1/chat/completions/` (catch-all) to the same upstream, and an Envoy
 * without normalize_path/merge_slashes forwards the rest, so each variant
 * must get its family's rules. An ordinary path is returned as is, without
 * allocating.
 */
export function routingPath(path: string): string {
  if (!MAYBE_NOT_ROUTING_FORM.test(path)) return path;
  const decoded = path.includes('%')
    ? path.replace(ESCAPE, (escape, hex: string) => {
        const char = String.fromCharCode(parseInt(hex, 16));
        return UNRESERVED.test(char) ? char : escape;
      })
    : path;
  const segments: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

function familyOf(table: RouteTable, method: string, path: string): RouteFamily | undefined {
  for (const { family, matchers } of table.families) {
    if (matchers.some((matcher) => matcher.matches(method, path))) return family;
  }
  return undefined;
}

export function classifyFamily(table: RouteTable, method: string, path: string): RouteFamily {
  // Public routes match the path exactly as sent, and only a canonical one: a variant is never free.
  if (table.publicRoutes.length > 0 && isCanonicalPath(path) && table.publicRoutes.some((matcher) => matcher.matches(method, path))) {
    return 'public';
  }
  const routing = routingPath(path);
  // The path as sent is the fallback, for prefix routes whose bare prefix ends in '/' (an operator's `/openai/`).
  const family = familyOf(table, method, routing) ?? (routing === path ? undefined : familyOf(table, method, path));
  // Unknown paths still need a key: nothing passes by omission.
  return family ?? 'other';
}

/**
 * The gated family (batches, files) a request belongs to when the operator
 * has not enabled it: matched on the routing form of the path and on the path
 * as sent, as families are, so no spelling of it passes.
 */
export function refusedRouteFamily(table: RouteTable, method: string, path: string): GatedRouteFamily | undefined {
  if (table.refusedRoutes.length === 0) return undefined;
  const routing = routingPath(path);
  const asSentToo = routing !== path;
  for (const route of table.refusedRoutes) {
    if (route.matcher.matches(method, routing) || (asSentToo && route.matcher.matches(method, path))) return route.family;
  }
  return undefined;
}
