import type { RouteFamily } from '../domain/route';
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

export function classifyFamily(table: RouteTable, method: string, path: string): RouteFamily {
  if (table.publicRoutes.length > 0 && isCanonicalPath(path) && table.publicRoutes.some((matcher) => matcher.matches(method, path))) {
    return 'public';
  }
  for (const { family, matchers } of table.families) {
    if (matchers.some((matcher) => matcher.matches(method, path))) return family;
  }
  // Unknown paths still need a key: nothing passes by omission.
  return 'other';
}
