import type { AuthRequest } from '../domain/auth-request';
import type { ClassifiedRoute } from '../domain/route';
import { classifyFamily, splitPathAndQuery } from '../routes/classify';
import { FAMILY_HEADER_RULES, rulesForModelsRoute, type FamilyHeaderRules } from '../routes/family-header-rules';
import type { PipelineSettings } from './pipeline-settings';

export interface RoutedRequest {
  route: ClassifiedRoute;
  rules: FamilyHeaderRules;
  query: URLSearchParams;
}

export function routeRequest(request: AuthRequest, settings: PipelineSettings): RoutedRequest {
  const { path, query } = splitPathAndQuery(request.path);
  const family = classifyFamily(settings.routeTable, request.method, path);
  const rules =
    family === 'models' ? rulesForModelsRoute(request.headers, path, settings.headerNames) : FAMILY_HEADER_RULES[family];
  return {
    route: { family, style: rules.style, pathWithoutQuery: path },
    rules,
    query: new URLSearchParams(query),
  };
}
