import type { AuthRequest } from '../domain/auth-request';
import type { Decision, DenyDecision } from '../domain/decision';
import { extractCredential, QUERY_KEY_PARAMETER } from '../credentials/extract-credential';
import { hashCustomerKey, parseCustomerKey, type KeyFormatProblem } from '../keys/customer-key';
import type { Authorizer, KeyIndex } from '../domain/authorization';
import { accountOutcomeToDecision } from './account-outcome-step';
import type { PipelineSettings } from './pipeline-settings';
import { routeRequest } from './route-step';
import { findUpstreamProviderKey } from './upstream-key-step';
import { checkVersionHeader } from './version-header-step';

export interface PipelineDeps {
  settings: PipelineSettings;
  /** Key hash → ids; cached in process in production (the mapping never changes). */
  keyIndex: KeyIndex;
  /** Key status, billing and rate limits, decided atomically by the store. */
  authorizer: Authorizer;
}

const MALFORMED: Record<KeyFormatProblem, string> = {
  prefix: 'does not start with gk_live_ or gk_test_',
  length: 'has the wrong length',
  alphabet: 'contains characters that never appear in keys',
  checksum: 'fails its checksum (a typo or a truncated copy)',
};

/**
 * The whole decision for one request: route → upstream-key scan → credential
 * → key format → version header → key lookup → (key status → billing → rate
 * limits, atomically in the store). Every step before the lookup works
 * offline, so junk never costs a Redis round trip; with the key index cached,
 * a known key costs exactly one.
 */
export async function decide(request: AuthRequest, deps: PipelineDeps): Promise<Decision> {
  const { settings } = deps;
  const { route, rules, query } = routeRequest(request, settings);
  const strip = {
    headers: settings.headerNames.allCredentialHeaders,
    queryParameters: query.has(QUERY_KEY_PARAMETER) ? [QUERY_KEY_PARAMETER] : [],
  };
  const deny = (fields: Omit<DenyDecision, 'kind' | 'route'>): DenyDecision => ({ kind: 'deny', route, ...fields });

  if (route.family === 'public') return { kind: 'allow', route, strip };

  const upstream = findUpstreamProviderKey(request, query, settings.headerNames);
  if (upstream) {
    return deny({
      reason: 'upstream_key_not_accepted',
      param: upstream.where,
      message: `The credential in '${upstream.where}' looks like ${/^[AEIOU]/.test(upstream.provider) ? 'an' : 'a'} ${upstream.provider} API key. This gateway does not accept upstream provider keys: use your customer API key from the dashboard's API Keys section.`,
    });
  }

  const credential = extractCredential({ headers: request.headers, query }, rules, {
    names: settings.headerNames,
    acceptQueryKey: settings.acceptQueryKey,
  });
  if (!credential.ok) {
    const { reason, message, param } = credential;
    return deny(param === undefined ? { reason, message } : { reason, message, param });
  }

  const parsed = parseCustomerKey(credential.credential);
  if (!parsed.ok) {
    return deny({
      reason: 'malformed_key',
      param: credential.source,
      message: `The API key in '${credential.source}' is malformed: it ${MALFORMED[parsed.problem]}. Copy the whole key from the dashboard's API Keys section.`,
    });
  }
  const keyPrefix = parsed.displayPrefix;

  const version = checkVersionHeader(request.headers, rules, settings);
  if (!version.ok) return deny({ reason: version.reason, message: version.message, param: version.param, keyPrefix });

  const unavailable = (error: unknown) =>
    deny({
      reason: 'store_unavailable',
      keyPrefix,
      message: 'The gateway cannot verify API keys right now. Retry shortly.',
      internalDetail: error instanceof Error ? error.message : String(error),
    });
  const unknown = () =>
    deny({
      reason: 'unknown_key',
      keyPrefix,
      message: `Invalid API key ${keyPrefix}…. Check that you copied the whole key from the dashboard's API Keys section.`,
    });

  let ids;
  try {
    ids = await deps.keyIndex.resolveKeyHash(hashCustomerKey(credential.credential));
  } catch (error) {
    return unavailable(error);
  }
  if (!ids) return unknown();

  let outcome;
  try {
    outcome = await deps.authorizer.authorize({ ...ids, defaultPlan: settings.defaultPlan });
  } catch (error) {
    return unavailable(error);
  }
  if (outcome.kind === 'unknown_key') return unknown();
  if (outcome.kind === 'allow') {
    return {
      kind: 'allow',
      route,
      strip,
      identity: { accountId: ids.accountId, keyId: ids.keyId, keyPrefix: outcome.prefix, environment: outcome.environment },
      ...(outcome.tightest ? { rateLimit: outcome.tightest } : {}),
    };
  }
  return deny({ ...accountOutcomeToDecision(outcome), keyPrefix: outcome.prefix, accountId: ids.accountId });
}
