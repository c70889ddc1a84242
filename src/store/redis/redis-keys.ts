/**
 * Every Redis key this service writes, in one place.
 *
 * Two immutable, global indexes (key hash → key and account id, key id →
 * account id), one global index from a member's principal to the accounts it
 * belongs to, and everything mutable under the account's hash tag
 * `{acct:ID}`: account (with its rate-limit and token buckets and monthly
 * spend as fields), key records, key set, members, the account's own audit
 * trail, usage aggregates and markers, credit idempotency keys. The authorize and usage scripts
 * touch only that tag, so they run unchanged on Redis Cluster (one slot per
 * account); the usage stream has its own. The scripts (lua/*.lua) get key
 * names in KEYS, and spell the hash field names below as literals: a field
 * renamed here is renamed there too (the store tests read the fields the
 * scripts write through these names).
 */
export const redisKeys = {
  keyIdsByHash: (keyHash: string) => `gwa:keyhash:${keyHash}`,
  accountIdByKeyId: (keyId: string) => `gwa:keyid:${keyId}`,
  /**
   * Set of the account ids a member principal (src/accounts/members.ts
   * principalKey: `identity:…:…` or `email:…`, URI-encoded, so no hash tag
   * can appear in it) belongs to or is invited to. Written before the
   * account's member record and checked against it on every read.
   */
  principalAccounts: (principalKey: string) => `gwa:member-of:${principalKey}`,
  /** Set of all account ids, for listings. */
  accounts: () => 'gwa:accounts',
  /**
   * Stream: the global audit trail, every entry. An account's entries are also in its own trail (accountAudit); the
   * operator-level ones (operator tokens created and revoked, tied to no account) are in this one only: it is their trail.
   */
  audit: () => 'gwa:audit',
  /**
   * A customer dashboard session (JSON, with a time to live), named by the
   * SHA-256 of its session id: a dump of Redis holds no live session id.
   */
  customerSession: (sessionIdHash: string) => `gwa:session:${sessionIdHash}`,
  /** An operator dashboard session, as customerSession but apart: neither dashboard can read the other's sessions. */
  operatorSession: (sessionIdHash: string) => `gwa:operator-session:${sessionIdHash}`,
  /** String: an operator API token's record (JSON, with its hash); kept after revocation and expiry, for the listing. */
  operatorToken: (tokenId: string) => `gwa:operator-token:${tokenId}`,
  /** String: token hash → token id, while the token is not revoked (deleted first when it is). */
  operatorTokenIdByHash: (tokenHash: string) => `gwa:operator-token-hash:${tokenHash}`,
  /** Set of every operator token id, for the listing. */
  operatorTokens: () => 'gwa:operator-tokens',
  accountTag: (accountId: string) => `gwa:{acct:${accountId}}:`,
  account: (accountId: string) => `${redisKeys.accountTag(accountId)}account`,
  key: (accountId: string, keyId: string) => `${redisKeys.accountTag(accountId)}key:${keyId}`,
  accountKeys: (accountId: string) => `${redisKeys.accountTag(accountId)}keys`,
  /** Sorted set: the account's keys that count toward its active-key cap, scored by when they stop counting (ms; +inf). */
  activeKeys: (accountId: string) => `${redisKeys.accountTag(accountId)}active-keys`,
  /** Account hash field: present once activeKeys holds every key of the account (built once for accounts older than the cap). */
  activeKeysIndexedField: () => 'activeKeysIndexed',
  /** Hash: member id → member record (JSON). */
  members: (accountId: string) => `${redisKeys.accountTag(accountId)}members`,
  /** Hash: principal key → member id; one member per principal per account. */
  memberPrincipals: (accountId: string) => `${redisKeys.accountTag(accountId)}member-principals`,
  /**
   * Hash: key id → requests in one UTC hour or day starting at `startMs`
   * (src/keys/request-counts.ts), expiring after its retention. Written by
   * the last-used script, never by a Check.
   */
  requestCounts: (accountId: string, granularity: 'hour' | 'day', startMs: number) =>
    `${redisKeys.accountTag(accountId)}requests:${granularity}:${startMs}`,
  /** String: present while the batch with this id (LastUsedRecorder) is known counted, so a resent batch counts once. */
  countedBatch: (accountId: string, batchId: string) => `${redisKeys.accountTag(accountId)}counted-batch:${batchId}`,
  /**
   * String (with a TTL): a credit adjustment's idempotency key was used on
   * this account, holding `<expiresAtMs> <amount> <attemptId> <outcome>
   * [<balance>]` (see gwaAdjustCredit). The key is printable ASCII and may
   * hold braces: the account's tag comes first, so it still names the slot.
   */
  creditIdempotency: (accountId: string, idempotencyKey: string) =>
    `${redisKeys.accountTag(accountId)}credit-idempotency:${idempotencyKey}`,
  /** String, set once (NX) by the call that writes the audit entry of a keyed credit: see Store.claimCreditAudit. */
  creditAuditClaim: (accountId: string, idempotencyKey: string) => `${redisKeys.accountTag(accountId)}credit-audited:${idempotencyKey}`,
  /** Stream: the account's own audit trail (also in the global one), which its owners read. */
  accountAudit: (accountId: string) => `${redisKeys.accountTag(accountId)}audit`,
  /**
   * Rate-limit buckets (GCRA theoretical arrival times, µs) are fields of the
   * account's own hash, so one HMGET reads the account and every bucket a
   * decision needs. One field per key, `rk:<keyId>`, and one for the account,
   * `ra`, each holding all of its windows: binary entries of the window and
   * its TAT (redis-records.ts, PACKED_BUCKET_STRUCT), the limits in force
   * first in their order. Two fields to read and write per decision, however
   * many windows, and half the hash entries of one field per window
   * (measured: test/bench/redis-check-path.ts).
   */
  keyBucketFieldPrefix: () => 'rk:',
  keyBucketField: (keyId: string) => `${redisKeys.keyBucketFieldPrefix()}${keyId}`,
  accountBucketField: () => 'ra',
  /** Account hash field: when (µs, Redis's clock) the authorize script next deletes bucket fields whose time has passed. */
  bucketSweepField: () => 'bucketSweepAtUs',
  // Usage (issue 16). Fields the authorize script reads in its one HMGET of
  // the account hash and of the key record are declared here too.

  /**
   * Token budget buckets, fields of the account hash like the rate-limit
   * buckets, and packed like them: one field per key, `tp:k:<keyId>`, and
   * one for the account, `tp:a`, each holding all of its windows as binary
   * entries of the window, the GCRA TAT in µs and the TAT's fraction of a
   * µs as a numerator over the budget's tokens (redis-records.ts,
   * PACKED_TOKEN_BUCKET_STRUCT; src/accounts/limits/token-budget.ts for the
   * arithmetic). The budgets in force first in their order, then other
   * windows whose TAT is still ahead. A decision reads one field per scope
   * however many budgets, and parses no text. Beside them, `tn:k:<keyId>:<window>`
   * and `tn:a:<window>`: until when (µs) that budget sends no other
   * budget.reached webhook event; written and swept by lua/apply-usage.lua alone.
   */
  tokenBucketFieldPrefix: () => 'tp:',
  keyTokenBucketField: (keyId: string) => `${redisKeys.tokenBucketFieldPrefix()}k:${keyId}`,
  accountTokenBucketField: () => `${redisKeys.tokenBucketFieldPrefix()}a`,
  /**
   * Token budget overrides as JSON: on the account hash `{"key"?:[…],"account"?:[…]}`,
   * on the key record `[…]`; each budget `{"tokens":N,"windowSeconds":S}`.
   */
  tokenBudgetsField: () => 'tokenBudgets',
  /** Spend cap (integer minor units per UTC month), on the account hash and on the key record. */
  monthlySpendCapField: () => 'monthlySpendCap',
  /**
   * Restrictions (src/keys/key-restrictions.ts, restrictionsText): the key's own on its record, its keys' defaults on
   * the account hash. Always written and removed together with restrictionsStampField.
   */
  restrictionsField: () => 'restrictions',
  /**
   * The stamp of the text in restrictionsField (src/keys/key-restrictions.ts, restrictionsStamp), in the same record:
   * what the authorize script reads on every decision and compares with the stamps Check decided on; the texts are
   * read only when they differ.
   */
  restrictionsStampField: () => 'restrictionsStamp',
  /**
   * Spend (integer minor units) per UTC month `YYYY-MM`, fields of the account
   * hash: `sp:a:<month>` for the account, `sp:k:<keyId>:<month>` per key. The
   * current and the previous month are kept.
   */
  spendFieldPrefix: () => 'sp:',
  accountSpendField: (month: string) => `${redisKeys.spendFieldPrefix()}a:${month}`,
  keySpendField: (keyId: string, month: string) => `${redisKeys.spendFieldPrefix()}k:${keyId}:${month}`,
  /** Account hash field: minor units of usage the prepaid balance could not take (it was at −10^15). */
  creditShortfallField: () => 'creditShortfall',
  /** Account hash field: when (µs) the usage script next deletes spent token buckets and spend of months before the previous. */
  usageSweepField: () => 'usageSweepDueUs',
  /**
   * Marker (with a TTL) that the credit hold of a request was released (lib/release-hold.lua): once, whether by its
   * usage record or because its answer cost nothing. The holds themselves are sums at the end of the bucket fields
   * (PACKED_HOLD_SLOTS_STRUCT).
   */
  holdReleased: (accountId: string, requestId: string) => `${redisKeys.accountTag(accountId)}hold:released:${requestId}`,
  /**
   * Field (the empty name: no account field) that the bucket sweep (on an
   * account's first decision) writes to the account hash, its value longer
   * than Redis's hash-max-listpack-value (64 by default), so it is a
   * hashtable from then on: in a listpack a field is found by
   * comparing it with each one before it, and every Check looks up about ten
   * account fields, most of them absent (12k of an allowed decision's 124k
   * instructions at ten keys an account), in a hashtable by one hash.
   */
  hashtableMarkerField: () => '',
  hashtableMarkerValue: () => 'keeps this hash a hashtable: longer than the 64 bytes of hash-max-listpack-value',
  /** Marker (with a TTL) that a usage record was applied to the account: holds how it was billed. */
  usageApplied: (accountId: string, requestId: string) => `${redisKeys.accountTag(accountId)}usage:applied:${requestId}`,
  /**
   * Hour (`2026-11-22T10`) and day (`2026-11-22`) aggregates: hashes with a
   * TTL, fields laid out by src/store/usage-aggregates.ts.
   */
  usageHour: (accountId: string, hour: string) => `${redisKeys.accountTag(accountId)}usage:h:${hour}`,
  usageDay: (accountId: string, day: string) => `${redisKeys.accountTag(accountId)}usage:d:${day}`,
  /**
   * The usage stream for the billing system, and its markers (with a TTL)
   * that a record was appended: one slot of their own (`{usage}`), since one
   * stream cannot share a slot with every account.
   */
  usageStream: () => 'gwa:{usage}:stream',
  usageStreamed: (accountId: string, requestId: string) => `gwa:{usage}:streamed:${accountId}:${requestId}`,
  // Webhooks (src/ports/webhook-store.ts), under the account's tag: every change that causes an event appends it
  // to the outbox in its own script.
  /** Stream: the account's events not yet fanned out to its endpoints (fields id, type, payload, endpoint). */
  webhookOutbox: (accountId: string) => `${redisKeys.accountTag(accountId)}webhook-outbox`,
  /** Hash: endpoint id → its configuration (JSON, written whole by the store, never changed by a script). */
  webhookEndpoints: (accountId: string) => `${redisKeys.accountTag(accountId)}webhook-endpoints`,
  /**
   * Hash: `disabled:<endpointId>` → why (absent: enabled), `failures:<endpointId>` → failed attempts in a row, and
   * `creditLowThreshold` → the balance (minor units) below which usage sends `credit.low` (read by the usage script).
   */
  webhookEndpointState: (accountId: string) => `${redisKeys.accountTag(accountId)}webhook-endpoint-state`,
  /** Hash: `<eventId>:<endpointId>` → the delivery (JSON: event id, type, payload, endpoint id, attempts made). */
  webhookDeliveries: (accountId: string) => `${redisKeys.accountTag(accountId)}webhook-deliveries`,
  /** Sorted set: the deliveries, scored by when (ms) the next attempt is due, or a lease ends. */
  webhookDue: (accountId: string) => `${redisKeys.accountTag(accountId)}webhook-due`,
  /** List: the endpoint's delivery attempts (JSON), newest first, trimmed to DELIVERY_LOG_MAX_ENTRIES. */
  webhookLog: (accountId: string, endpointId: string) => `${redisKeys.accountTag(accountId)}webhook-log:${endpointId}`,
  /**
   * Set of account ids that may have webhook work: added after each change that appended events (another slot, so
   * not in its script), removed by the dispatcher once idle; a sweep at start-up puts back what a crash left out.
   */
  webhookAccounts: () => 'gwa:{webhooks}:accounts',
};
