/**
 * docs/concepts/metering.md ("Prices") gives operators a per-route ext_authz override that sends
 * chat-completions and messages bodies to Check, so `unpricedModels: refuse`
 * can read their model. The shipped envoy.yaml does not carry it (buffering
 * costs every request); this test applies that page's snippet, as written,
 * to the body-style routes of envoy.yaml and holds the result to Envoy's
 * official protos and to the ext_authz contract.
 */
import { checkBootstrap } from './support/envoy-bootstrap';
import { connectionManager, EXT_AUTHZ_FILTER, extAuthzProblems, routeFor, routes, type EnvoyView } from './support/envoy-semantics';
import { DEFAULT_GRPC_SERVER_SETTINGS } from '../../src/transport/grpc-server';
import { parseYaml, readRepoFile } from './support/repo-files';

/** The page's routes to change, and a path each serves. */
const BODY_STYLE_ROUTES: Readonly<Record<string, string>> = {
  chat_completions: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  responses: '/v1/responses',
  openai_compat: '/v1beta/openai/chat/completions',
  messages: '/v1/messages',
};

/** The "Prices" section of docs/concepts/metering.md. */
function pricesSection(): string {
  const page = readRepoFile('docs', 'concepts', 'metering.md');
  const start = page.indexOf('## Prices');
  return page.slice(start, page.indexOf('\n## ', start + 1));
}

/** The yaml block of "Prices" that sets with_request_body, un-indented from its list item. */
function snippet(): { typed_per_filter_config: Record<string, unknown> } {
  const block = /```yaml\n([\s\S]*?)```/.exec(pricesSection())?.[1];
  if (!block?.includes('with_request_body')) throw new Error('docs/concepts/metering.md "Prices" has no yaml block with with_request_body');
  const lines = block.split('\n');
  const indent = Math.min(...lines.filter((line) => line.trim() !== '').map((line) => line.length - line.trimStart().length));
  return parseYaml(lines.map((line) => line.slice(indent)).join('\n'), 'the Prices snippet') as {
    typed_per_filter_config: Record<string, unknown>;
  };
}

describe('docs/concepts/metering.md "Prices": the with_request_body override for unpricedModels refuse', () => {
  it('names, in its text, exactly the routes this test changes', () => {
    const section = pricesSection();
    for (const name of Object.keys(BODY_STYLE_ROUTES)) expect(section).toContain(`\`${name}\``);
  });

  it('applied to the body-style routes of envoy.yaml, is a valid Bootstrap on the official protos, and only those routes send a body', () => {
    const config = parseYaml(readRepoFile('envoy.yaml'), 'envoy.yaml') as EnvoyView;
    const override = snippet().typed_per_filter_config;
    const named = routes(config).filter((route) => route.name !== undefined && route.name in BODY_STYLE_ROUTES);
    expect(named.map((route) => route.name).sort()).toEqual(Object.keys(BODY_STYLE_ROUTES).sort());
    for (const route of named) (route as { typed_per_filter_config?: unknown }).typed_per_filter_config = override;

    const view = checkBootstrap(config).view;
    // The filter itself still sends no body: only these routes buffer.
    expect(extAuthzProblems(view)).toEqual([]);
    for (const path of Object.values(BODY_STYLE_ROUTES)) {
      const perRoute = routeFor(view, path)!.typed_per_filter_config?.[EXT_AUTHZ_FILTER] as Record<string, unknown> | undefined;
      expect({ path, perRoute }).toEqual({
        path,
        perRoute: {
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute',
          check_settings: { with_request_body: { max_request_bytes: 3145728, allow_partial_message: false, pack_as_bytes: true } },
        },
      });
    }
    // The body and the largest headers Envoy accepts fit in one Check message the gateway reads (else: RESOURCE_EXHAUSTED, 503).
    const bodyBytes = (override[EXT_AUTHZ_FILTER] as { check_settings: { with_request_body: { max_request_bytes: number } } })
      .check_settings.with_request_body.max_request_bytes;
    const headerBytes = connectionManager(view).max_request_headers_kb * 1024;
    expect(bodyBytes + headerBytes).toBeLessThan(DEFAULT_GRPC_SERVER_SETTINGS.maxReceiveMessageBytes - 64 * 1024);
    for (const path of ['/v1beta/models/gemini-2.5-flash:generateContent', '/v1/models', '/anything']) {
      expect({ path, perRoute: routeFor(view, path)!.typed_per_filter_config }).toEqual({ path, perRoute: undefined });
    }
  });
});
