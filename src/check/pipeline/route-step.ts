import type { AuthRequest } from '../auth-request';
import type { ClassifiedRoute, GatedRouteFamily } from '../routes/route';
import { QUERY_KEY_PARAMETER } from '../credentials/extract-credential';
import { unremovableQueryKeyName } from '../credentials/query-key-name';
import { classifyFamily, refusedRouteFamily, routingPath, splitPathAndQuery } from '../routes/classify';
import {
  FAMILY_HEADER_RULES,
  isSharedFilesPath,
  rulesForFilesRoute,
  rulesForModelsRoute,
  type FamilyHeaderRules,
} from '../routes/family-header-rules';
import type { PipelineSettings } from './pipeline-settings';

/** The read-only view of the query string the pipeline needs (URLSearchParams has it). */
export interface QueryParameters {
  has(name: string): boolean;
  getAll(name: string): string[];
}

/** Most requests carry no query: they share this instead of parsing an empty string. */
export const NO_QUERY: QueryParameters = Object.freeze({
  has: () => false,
  getAll: () => [],
});

export interface RoutedRequest {
  route: ClassifiedRoute;
  rules: FamilyHeaderRules;
  query: QueryParameters;
  /** A query parameter that reads as `key` but that Envoy cannot remove (its raw name differs): the request must be refused. */
  unremovableQueryKey?: string;
  /** A gated route family the operator has not enabled: the request must be refused. */
  refusedRoutes?: GatedRouteFamily;
}

export function routeRequest(request: AuthRequest, settings: PipelineSettings): RoutedRequest {
  const { path, query } = splitPathAndQuery(request.path);
  const family = classifyFamily(settings.routeTable, request.method, path);
  const rules =
    family === 'models'
      ? rulesForModelsRoute(request.headers, routingPath(path), settings.headerNames)
      : // The cheap test first: most Checks are chat completions, and only a files path names files.
        family === 'chat-completions' && path.includes('files') && isSharedFilesPath(routingPath(path))
        ? rulesForFilesRoute(request.headers, settings.headerNames)
        : FAMILY_HEADER_RULES[family];
  const route = { family, style: rules.style, pathWithoutQuery: path };
  const refusedRoutes =
    refusedRouteFamily(settings.routeTable, request.method, path) ??
    (family === 'other' && settings.routeTable.refusesUnlisted ? 'unlisted' : undefined);
  const refused = refusedRoutes === undefined ? {} : { refusedRoutes };
  if (query === '') return { route, rules, query: NO_QUERY, ...refused };
  const parsed = new URLSearchParams(query);
  const unremovableQueryKey = parsed.has(QUERY_KEY_PARAMETER) ? unremovableQueryKeyName(query) : undefined;
  return unremovableQueryKey === undefined
    ? { route, rules, query: parsed, ...refused }
    : { route, rules, query: parsed, unremovableQueryKey, ...refused };
}
