// Run by test/pipeline/hidden-classes.test.ts as `node --allow-natives-syntax hidden-class-probe.js <dist>`.
// Builds each Check-path object the same way many times over, until V8 runs the code optimized, then reports, per
// object, whether the last two built share one hidden class (map). On Node 20 (V8 11.3), optimized code gives an
// object literal that starts with a spread and then has more members a new map every time: with the authorize request built that
// way, each Check promoted ~190 bytes to old space. Prints one JSON object: { [label]: true | false }.
'use strict';
const path = require('node:path');

const dist = path.resolve(process.argv[2]);
const { loadSettings } = require(path.join(dist, 'platform/settings.js'));
const { decide } = require(path.join(dist, 'check/pipeline/decide.js'));
const { parseAuthorizeReply } = require(path.join(dist, 'store/redis/scripts.js'));
const { displayPrefixOf, generateCustomerKey } = require(path.join(dist, 'keys/customer-key.js'));

const ROUNDS = 20_000;
// %HaveSameMap is V8 syntax, valid only under --allow-natives-syntax: compiled at run time so this file still parses.
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b);');

const loaded = loadSettings({ CONFIG_FILE: '' });
if (!loaded.ok) throw new Error(loaded.problems.join('; '));
const settings = loaded.settings.pipeline;
const ids = { keyId: 'key_0123456789abcdef', accountId: 'acme' };
const tightest = { scope: 'key', limit: 600, windowSeconds: 60, remaining: 599, resetMs: 100 };
const hit = { scope: 'key', limit: 600, windowSeconds: 60, remaining: 0, resetMs: 100, retryAfterMs: 26_000 };
const budget = { scope: 'account', tokens: 1000, windowSeconds: 60, remaining: 0, resetMs: 100, retryAfterMs: 5_000 };
const chat = (credential) => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: { authorization: `Bearer ${credential}` },
  requestId: 'req-1',
});
const key = generateCustomerKey('live');
// The store decided on this key's own record: decide() refuses another key's prefix.
const prefix = displayPrefixOf(key);

const outcomes = {
  allow: { kind: 'allow', prefix, environment: 'live', tightest },
  rate_limited: { kind: 'rate_limited', prefix, hit },
  token_budget_exhausted: { kind: 'token_budget_exhausted', prefix, budget },
  account_suspended: { kind: 'account_suspended', prefix },
};

async function twoLast(build) {
  let before;
  let last;
  for (let round = 0; round < ROUNDS; round += 1) {
    before = last;
    last = await build();
  }
  return [before, last];
}

async function main() {
  const report = {};
  const same = (label, [a, b], pick = (x) => x) => {
    report[label] = haveSameMap(pick(a), pick(b));
  };
  for (const [kind, outcome] of Object.entries(outcomes)) {
    let request;
    const deps = {
      settings,
      keyIndex: { resolveKeyHash: () => Promise.resolve(ids) },
      authorizer: {
        authorize: (asked) => {
          request = asked;
          return Promise.resolve(outcome);
        },
      },
    };
    const pair = await twoLast(async () => ({ decision: await decide(chat(key), deps), request }));
    same(`decide → authorize request (${kind})`, pair, (x) => x.request);
    same(`decision (${kind})`, pair, (x) => x.decision);
  }
  const cases = {
    store_unavailable: { resolveKeyHash: () => Promise.resolve(ids), authorize: () => Promise.reject(new Error('down')) },
    unknown_key: { resolveKeyHash: () => Promise.resolve(null), authorize: () => Promise.reject(new Error('not called')) },
  };
  for (const [reason, fake] of Object.entries(cases)) {
    const deps = { settings, keyIndex: { resolveKeyHash: fake.resolveKeyHash }, authorizer: { authorize: fake.authorize } };
    same(`decision (${reason})`, await twoLast(() => decide(chat(key), deps)));
  }
  const offline = {
    settings,
    keyIndex: { resolveKeyHash: () => Promise.resolve(ids) },
    authorizer: { authorize: () => Promise.resolve(outcomes.allow) },
  };
  same('decision (malformed_key)', await twoLast(() => decide(chat(`${key.slice(0, -3)}xyz`), offline)));
  same('decision (upstream_key_not_accepted)', await twoLast(() => decide(chat('sk-ant-api03-abcdefghijklmnop'), offline)));

  const replies = {
    allow: ['allow', 'gk_live_abcd', 'live', 'key', 600, 60, 599, 100, 'tokens', 'account', 1000, 60, 999, 100],
    rate_limited: ['rate_limited', 'gk_live_abcd', 'key', 600, 60, 0, 100, 26000],
    token_budget_exhausted: ['token_budget_exhausted', 'gk_live_abcd', 'account', 1000, 60, 0, 100, 5000],
  };
  for (const [kind, reply] of Object.entries(replies)) {
    const pair = await twoLast(() => parseAuthorizeReply(reply));
    same(`authorize reply (${kind})`, pair);
    const nested = { allow: 'tightestBudget', rate_limited: 'hit', token_budget_exhausted: 'budget' }[kind];
    same(`authorize reply (${kind}).${nested}`, pair, (x) => x[nested]);
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
