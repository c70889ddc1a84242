import type { AuthRequest } from '../auth-request';
import type { Decision, DenyDecision } from '../decision';
import { denial } from '../deny-reasons';
import { extractCredential, QUERY_KEY_PARAMETER } from '../credentials/extract-credential';
import { hashCustomerKey, parseCustomerKey } from '../../keys/customer-key';
import { describeSources } from '../routes/family-header-rules';
import type { Authorizer, KeyIndex } from '../ports';
import { accountOutcomeToDecision } from './account-outcome-step';
import { DEFAULT_CURRENCY } from '../../accounts/money';
import type { PipelineSettings } from './pipeline-settings';
import { routeRequest } from './route-step';
import { refuseUnpricedModel } from './model-step';
import { findUpstreamProviderKey } from './upstream-key-step';
import { checkVersionHeader } from './version-header-step';
import { holdFor } from './hold-step';
import { effectiveRestrictions, refusedByRestrictions, NO_RESTRICTIONS } from './restriction-step';
import type { RestrictionsCache } from '../restrictions-cache';

export interface PipelineDeps {
  settings: PipelineSettings;
  /** Key hash → ids; cached in process in production (the mapping never changes). */
  keyIndex: KeyIndex;
  /** Key status, billing and rate limits, decided atomically by the store. */
  authorizer: Authorizer;
  /** Told when the store decided on another key's record than the one presented (answered store_unavailable); for metrics. */
  onStoreIdentityMismatch?: () => void;
  /**
   * Restricted keys' restrictions as this replica last read them; without it, a restricted key is read from the
   * store's reply on every request (one more round trip each).
   */
  restrictions?: RestrictionsCache;
}

/**
 * Why a Check was answered store_unavailable when the key's restrictions changed again between the store's answer
 * with the new ones and the decision on them: only a writer changing them without pause can do that.
 */
export const RESTRICTIONS_KEPT_CHANGING = "the key's restrictions changed twice while one request was decided";

/**
 * Why a Check was answered store_unavailable when the store's decision named
 * another key's record than the one presented: a reply matched to the wrong
 * request (the key index's or the authorize script's). For operators' logs;
 * no key material.
 */
export const STORE_IDENTITY_MISMATCH =
  "the store's decision is for another key than the one presented (display prefixes differ): a reply matched to the wrong request";

/**
 * The whole decision for one request: route → route not enabled → upstream-key scan → credential
 * → key format → version header → key lookup → unpriced model → credit hold
 * estimate → restrictions (address, endpoint, model) → (key status → the
 * restrictions confirmed → billing → rate limits, and the hold, atomically in
 * the store). Every step before the lookup works
 * offline, so junk never costs a Redis round trip; with the key index cached,
 * a known key costs exactly one.
 */
export async function decide(request: AuthRequest, deps: PipelineDeps): Promise<Decision> {
  const { settings } = deps;
  const { route, rules, query, unremovableQueryKey, refusedRoutes } = routeRequest(request, settings);
  const strip = {
    headers: settings.headerNames.allCredentialHeaders,
    queryParameters: query.has(QUERY_KEY_PARAMETER) ? [QUERY_KEY_PARAMETER] : [],
  };
  const deny = (fields: Omit<DenyDecision, 'kind' | 'route'>): DenyDecision => ({ kind: 'deny', route, ...fields });

  if (unremovableQueryKey !== undefined) {
    // Checked before everything else, public routes included: whatever the decision, that key would reach the upstream.
    const ways = describeSources(rules, settings.headerNames);
    return deny({
      param: unremovableQueryKey,
      ...denial('query_key_not_removable', { rawName: unremovableQueryKey, parameter: QUERY_KEY_PARAMETER, ways }),
    });
  }
  // Before public routes and the key: a route whose usage is not metered is refused whoever asks, and costs no lookup.
  if (refusedRoutes !== undefined) return deny(denial('route_not_enabled', { routes: refusedRoutes }));
  if (route.family === 'public') return { kind: 'allow', route, strip };

  const upstream = findUpstreamProviderKey(request, query, settings.headerNames);
  if (upstream) {
    return deny({ param: upstream.where, ...denial('upstream_key_not_accepted', upstream) });
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
    return deny({ param: credential.source, ...denial('malformed_key', { where: credential.source, problem: parsed.problem }) });
  }
  const keyPrefix = parsed.displayPrefix;

  const version = checkVersionHeader(request.headers, rules, settings);
  if (!version.ok) return deny({ reason: version.reason, message: version.message, param: version.param, keyPrefix });

  const unavailable = (error: unknown) =>
    deny({
      keyPrefix,
      internalDetail: error instanceof Error ? error.message : String(error),
      ...denial('store_unavailable'),
    });
  const unknown = () => deny({ keyPrefix, ...denial('unknown_key', { keyPrefix }) });

  const keyHash = hashCustomerKey(credential.credential);
  let ids;
  try {
    ids = await deps.keyIndex.resolveKeyHash(keyHash);
  } catch (error) {
    return unavailable(error);
  }
  if (!ids) return unknown();

  // After the key lookup, so only a known key learns which models are offered (and an unauthenticated caller
  // still gets its 401); before the store's authorize, so a refused model costs no Redis round trip and consumes
  // no rate-limit token or budget. So a revoked key may still learn that a model is not offered: its status is
  // only known inside the store's atomic step.
  const unpriced = refuseUnpricedModel(request, route, settings.pricing);
  if (unpriced) return deny({ keyPrefix, accountId: ids.accountId, ...unpriced });

  // A store call that fails leaves no hold behind: the store lets go of one its step placed after the call's deadline
  // (ReleasesLateHolds).
  const hold = holdFor(request, route, settings.pricing);
  // Restrictions after the key is known and before the store's atomic step: decided here on what this replica holds,
  // confirmed there (the stamps of the texts it was decided on, after the key's status), so a refused request consumes no rate
  // limit and holds no credit, and a revoked key is told it is revoked. A change is answered with the new texts:
  // decided again, in one more round trip, once per replica and change.
  let restrictions = deps.restrictions?.get(keyHash) ?? NO_RESTRICTIONS;
  let refusal = refusedByRestrictions(request, route, restrictions);
  let outcome;
  for (let attempt = 0; ; attempt += 1) {
    try {
      outcome = await deps.authorizer.authorize({
        keyId: ids.keyId,
        accountId: ids.accountId,
        defaultPlan: settings.defaultPlan,
        defaultTokenBudgets: settings.defaultTokenBudgets,
        restrictions: refusal
          ? { keyStamp: restrictions.keyStamp, accountStamp: restrictions.accountStamp, refused: refusal.kind }
          : restrictions,
        ...(hold ? { hold } : {}),
      });
    } catch (error) {
      return unavailable(error);
    }
    // Another key's reply is never cached as this key's restrictions: the identity check below answers it.
    if (outcome.kind !== 'restrictions_changed' || outcome.prefix !== keyPrefix) break;
    if (attempt > 0) return unavailable(new Error(RESTRICTIONS_KEPT_CHANGING));
    try {
      restrictions = effectiveRestrictions(outcome.keyText, outcome.accountText);
    } catch (error) {
      // Unreadable restrictions refuse the key (fail closed) until the record is repaired.
      return unavailable(error);
    }
    deps.restrictions?.set(keyHash, restrictions);
    refusal = refusedByRestrictions(request, route, restrictions);
  }
  if (outcome.kind === 'unknown_key') return unknown();
  // Every other outcome carries the display prefix of the record it was decided on. Another key's means a reply
  // crossed with another request's: never an allow, nor another key's denial. The key index entry that led there
  // may be the crossed reply, so the cache lets it go.
  if (outcome.prefix !== keyPrefix) {
    deps.keyIndex.forget?.(keyHash);
    deps.onStoreIdentityMismatch?.();
    return unavailable(new Error(STORE_IDENTITY_MISMATCH));
  }
  if (outcome.kind === 'allow') {
    return {
      kind: 'allow',
      route,
      strip,
      identity: { accountId: ids.accountId, keyId: ids.keyId, keyPrefix: outcome.prefix, environment: outcome.environment },
      ...(outcome.tightest ? { rateLimit: outcome.tightest } : {}),
      ...(outcome.tightestBudget ? { tokenBudget: outcome.tightestBudget } : {}),
      ...(outcome.held ? { held: outcome.held } : {}),
    };
  }
  if (outcome.kind === 'restricted' || outcome.kind === 'restrictions_changed') {
    // restricted answers the refusal sent; without one the reply is not to this request.
    if (outcome.kind === 'restrictions_changed' || !refusal) return unavailable(new Error(`unexpected ${outcome.kind} from the store`));
    const { kind: _kind, ...refused } = refusal;
    return deny({ keyPrefix: outcome.prefix, accountId: ids.accountId, ...refused });
  }
  return deny({
    keyPrefix: outcome.prefix,
    accountId: ids.accountId,
    ...accountOutcomeToDecision(outcome, settings.currency ?? DEFAULT_CURRENCY),
  });
}
