/**
 * Every Redis key this service writes, in one place.
 *
 * Two immutable, global indexes (key hash → key and account id, key id →
 * account id) and everything mutable under the account's hash tag
 * `{acct:ID}`: account, key records, key set and rate-limit buckets. The
 * authorize script touches only that tag, so it runs unchanged on Redis
 * Cluster (one slot per account).
 */
export const redisKeys = {
  keyIdsByHash: (keyHash: string) => `gwa:keyhash:${keyHash}`,
  accountIdByKeyId: (keyId: string) => `gwa:keyid:${keyId}`,
  /** Set of all account ids, for listings. */
  accounts: () => 'gwa:accounts',
  /** Stream of admin mutations. */
  audit: () => 'gwa:audit',
  accountTag: (accountId: string) => `gwa:{acct:${accountId}}:`,
  account: (accountId: string) => `${redisKeys.accountTag(accountId)}account`,
  key: (accountId: string, keyId: string) => `${redisKeys.accountTag(accountId)}key:${keyId}`,
  accountKeys: (accountId: string) => `${redisKeys.accountTag(accountId)}keys`,
  /**
   * Rate-limit buckets (GCRA theoretical arrival time) up to the window: the
   * authorize script appends the window in seconds of each limit that applies,
   * which it only knows after reading the records.
   */
  keyBucketPrefix: (accountId: string, keyId: string) => `${redisKeys.accountTag(accountId)}rl:k:${keyId}:`,
  accountBucketPrefix: (accountId: string) => `${redisKeys.accountTag(accountId)}rl:a:`,
};
