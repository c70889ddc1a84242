/**
 * Redis commands a running replica sends whatever the traffic, and a test's
 * own bookkeeping: what a test that counts the commands of some requests
 * leaves out. The test's CONFIG RESETSTAT, INFO and MONITOR; the health
 * probe's PING (every HEALTH_INTERVAL_MS); the replica's sample of Redis's
 * clock, TIME, once a second (src/store/redis/redis-clock.ts); the webhook
 * dispatcher's look for accounts with deliveries due, SRANDMEMBER, every
 * WEBHOOK_POLL_INTERVAL_MS (src/webhooks/webhook-dispatcher.ts), and its sweep
 * for events left off that list (SSCAN of the accounts, XLEN and ZCARD of
 * each), one slice a minute.
 */
const BACKGROUND = /^(config|info|monitor|ping|time|srandmember|sscan|xlen|zcard)(\||$)/i;

export function isBackgroundCommand(name: string): boolean {
  return BACKGROUND.test(name);
}
