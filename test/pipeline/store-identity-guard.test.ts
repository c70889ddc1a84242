import type { AuthorizeOutcome, KeyIndex } from '../../src/check/ports';
import { toAuthRequest } from '../../src/check/check-request';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { decide, STORE_IDENTITY_MISMATCH, type PipelineDeps } from '../../src/check/pipeline/decide';
import { loadSettings } from '../../src/platform/settings';
import { envoyCheckRequest } from '../support/envoy-official-client';

/**
 * The store's outcome names the record it decided on by its display prefix.
 * One that is not the presented key's (a reply matched to another request)
 * is answered store_unavailable whatever it says: never an allow, nor a
 * denial under the other key's identity.
 */
const loaded = loadSettings({});
if (!loaded.ok) throw new Error(loaded.problems.join('; '));
const settings = loaded.settings.pipeline;
const presented = generateCustomerKey('live');
const other = displayPrefixOf(generateCustomerKey('live'));
const ids = { keyId: 'key_presented', accountId: 'acme' };
const tightest = { scope: 'key' as const, limit: 600, windowSeconds: 60, remaining: 599, resetMs: 100 };
const hit = { ...tightest, remaining: 0, retryAfterMs: 26_000 };

const outcomes = (prefix: string): AuthorizeOutcome[] => [
  { kind: 'allow', prefix, environment: 'live', tightest },
  { kind: 'rate_limited', prefix, hit },
  { kind: 'key_revoked', prefix },
  { kind: 'account_suspended', prefix },
  { kind: 'budget_exceeded', prefix, scope: 'account', cap: 100 },
];

function deps(outcome: AuthorizeOutcome) {
  const seen = { forgotten: [] as string[], mismatches: 0 };
  const keyIndex: KeyIndex = {
    resolveKeyHash: () => Promise.resolve(ids),
    forget: (keyHash) => seen.forgotten.push(keyHash),
  };
  const pipeline: PipelineDeps = {
    settings,
    keyIndex,
    authorizer: { authorize: () => Promise.resolve(outcome) },
    onStoreIdentityMismatch: () => (seen.mismatches += 1),
  };
  return { pipeline, seen };
}

const chat = toAuthRequest(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${presented}` } }));

it.each(outcomes(other).map((outcome) => [outcome.kind, outcome] as const))(
  "answers store_unavailable for a %s decided on another key's record, counts it and forgets the key's index entry",
  async (_kind, outcome) => {
    const { pipeline, seen } = deps(outcome);
    const decision = await decide(chat, pipeline);
    expect(decision).toMatchObject({ kind: 'deny', reason: 'store_unavailable', keyPrefix: displayPrefixOf(presented) });
    expect(decision.kind === 'deny' && decision.internalDetail).toBe(STORE_IDENTITY_MISMATCH);
    expect(JSON.stringify(decision)).not.toContain(other);
    expect(seen).toEqual({ forgotten: [hashCustomerKey(presented)], mismatches: 1 });
  },
);

it.each(outcomes(displayPrefixOf(presented)).map((outcome) => [outcome.kind, outcome] as const))(
  "keeps a %s decided on the presented key's own record",
  async (kind, outcome) => {
    const { pipeline, seen } = deps(outcome);
    const decision = await decide(chat, pipeline);
    expect(decision.kind === 'allow' ? 'allow' : decision.reason).toBe(kind === 'allow' ? 'allow' : kind);
    expect(seen).toEqual({ forgotten: [], mismatches: 0 });
  },
);
