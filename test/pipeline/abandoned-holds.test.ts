import type { AuthorizeOutcome, KeyIndex } from '../../src/check/ports';
import { toAuthRequest } from '../../src/check/check-request';
import { displayPrefixOf, generateCustomerKey } from '../../src/keys/customer-key';
import { decide, type PipelineDeps } from '../../src/check/pipeline/decide';
import { loadSettings } from '../../src/platform/settings';
import { envoyCheckRequest } from '../support/envoy-official-client';

/**
 * A refused Check never leaves a hold. When the store fails after the Check sent it a hold (a timeout: the script may
 * still run, and place it), the Check is answered store_unavailable and the hold is handed to onHoldAbandoned, which
 * the service wires to a release (src/accounts/credit-holds.ts releaseAbandonedHold).
 */
const loaded = loadSettings({});
if (!loaded.ok) throw new Error(loaded.problems.join('; '));
const settings = loaded.settings.pipeline;
const presented = generateCustomerKey('live');
const ids = { keyId: 'key_presented', accountId: 'acme' };

function deps(authorize: () => Promise<AuthorizeOutcome>) {
  const abandoned: [string, string][] = [];
  const keyIndex: KeyIndex = { resolveKeyHash: () => Promise.resolve(ids) };
  const pipeline: PipelineDeps = {
    settings,
    keyIndex,
    authorizer: { authorize },
    onHoldAbandoned: (accountId, requestId) => abandoned.push([accountId, requestId]),
  };
  return { pipeline, abandoned };
}

const request = (method: string, path: string) =>
  toAuthRequest(envoyCheckRequest({ method, path, headers: { authorization: `Bearer ${presented}`, 'x-request-id': 'req-timed-out' } }));
const timedOut = () => Promise.reject(new Error('Redis did not answer within 50 ms'));

it('a metered Check whose store call fails hands its hold over to be released, and is answered store_unavailable', async () => {
  const { pipeline, abandoned } = deps(timedOut);
  const decision = await decide(request('POST', '/v1/chat/completions'), pipeline);
  expect(decision).toMatchObject({ kind: 'deny', reason: 'store_unavailable' });
  expect(abandoned).toEqual([['acme', 'req-timed-out']]);
});

it("a reply decided on another key's record is a failure too: the hold is handed over", async () => {
  const other = displayPrefixOf(generateCustomerKey('live'));
  const { pipeline, abandoned } = deps(() => Promise.resolve({ kind: 'allow', prefix: other, environment: 'live' }));
  expect(await decide(request('POST', '/v1/chat/completions'), pipeline)).toMatchObject({ reason: 'store_unavailable' });
  expect(abandoned).toEqual([['acme', 'req-timed-out']]);
});

it('nothing is handed over for a Check that sent no hold, or that the store answered', async () => {
  const unmetered = deps(timedOut);
  expect(await decide(request('GET', '/v1/models'), unmetered.pipeline)).toMatchObject({ reason: 'store_unavailable' });
  expect(unmetered.abandoned).toEqual([]);
  const answered = deps(() => Promise.resolve({ kind: 'allow', prefix: displayPrefixOf(presented), environment: 'live' }));
  expect((await decide(request('POST', '/v1/chat/completions'), answered.pipeline)).kind).toBe('allow');
  const refused = deps(() => Promise.resolve({ kind: 'credit_exhausted', prefix: displayPrefixOf(presented) }));
  expect(await decide(request('POST', '/v1/chat/completions'), refused.pipeline)).toMatchObject({ reason: 'credit_exhausted' });
  expect([...answered.abandoned, ...refused.abandoned]).toEqual([]);
});
