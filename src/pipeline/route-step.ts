import type { AuthRequest } from '../domain/auth-request';
import type { ClassifiedRoute } from '../domain/route';
import { classifyFamily, splitPathAndQuery } from '../routes/classify';
import { FAMILY_HEADER_RULES, rulesForModelsRoute, type FamilyHeaderRules } from '../routes/family-header-rules';
import type { PipelineSettings } from '../domain/pipeline-settings';

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
}

export function routeRequest(request: AuthRequest, settings: PipelineSettings): RoutedRequest {
  const { path, query } = splitPathAndQuery(request.path);
  const family = classifyFamily(settings.routeTable, request.method, path);
  const rules =
    family === 'models' ? rulesForModelsRoute(request.headers, path, settings.headerNames) : FAMILY_HEADER_RULES[family];
  return {
    route: { family, style: rules.style, pathWithoutQuery: path },
    rules,
    query: query === '' ? NO_QUERY : new URLSearchParams(query),
  };
}
