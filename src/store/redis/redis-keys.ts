/**
 * Every Redis key this service writes, in one place.
 *
 * Two immutable, global indexes (key hash → key and account id, key id →
 * account id), one global index from a member's principal to the accounts it
 * belongs to, and everything mutable under the account's hash tag
 * `{acct:ID}`: account (with its rate-limit buckets as fields), key records,
 * key set, members and the account's own audit trail. Every script touches
 * only that tag, so it runs unchanged on Redis Cluster (one slot per account).
 */
export const redisKeys = {
  keyIdsByHash: (keyHash: string) => `gwa:keyhash:${keyHash}`,
  accountIdByKeyId: (keyId: string) => `gwa:keyid:${keyId}`,
  /**
   * Set of the account ids a member principal (src/domain/members.ts
   * principalKey: `identity:…:…` or `email:…`, URI-encoded, so no hash tag
   * can appear in it) belongs to or is invited to. Written before the
   * account's member record and checked against it on every read.
   */
  principalAccounts: (principalKey: string) => `gwa:member-of:${principalKey}`,
  /** Set of all account ids, for listings. */
  accounts: () => 'gwa:accounts',
  /** Stream of admin mutations. */
  audit: () => 'gwa:audit',
  /**
   * A customer dashboard session (JSON, with a time to live), named by the
   * SHA-256 of its session id: a dump of Redis holds no live session id.
   */
  customerSession: (sessionIdHash: string) => `gwa:session:${sessionIdHash}`,
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
   * (src/domain/request-counts.ts), expiring after its retention. Written by
   * the last-used script, never by a Check.
   */
  requestCounts: (accountId: string, granularity: 'hour' | 'day', startMs: number) =>
    `${redisKeys.accountTag(accountId)}requests:${granularity}:${startMs}`,
  /** String: present while the batch with this id (LastUsedRecorder) is known counted, so a resent batch counts once. */
  countedBatch: (accountId: string, batchId: string) => `${redisKeys.accountTag(accountId)}counted-batch:${batchId}`,
  /** Stream: the account's own audit trail (also in the global one), which its owners read. */
  accountAudit: (accountId: string) => `${redisKeys.accountTag(accountId)}audit`,
  /**
   * Rate-limit buckets (GCRA theoretical arrival time, µs) are fields of the
   * account's own hash, so one HMGET reads the account and every bucket a
   * decision needs: `rl:k:<keyId>:<windowSeconds>` per key limit,
   * `rl:a:<windowSeconds>` per account limit. The authorize script appends
   * the window, which it only knows after reading the records.
   */
  bucketFieldPrefix: () => 'rl:',
  keyBucketFieldPrefix: (keyId: string) => `${redisKeys.bucketFieldPrefix()}k:${keyId}:`,
  accountBucketFieldPrefix: () => `${redisKeys.bucketFieldPrefix()}a:`,
  /** Account hash field: when (µs, Redis's clock) the authorize script next deletes bucket fields whose time has passed. */
  bucketSweepField: () => 'rlSweepAtUs',
};
