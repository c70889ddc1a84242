import type Redis from 'ioredis';
import { redisKeys } from '../../src/store/redis/redis-keys';

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

/**
 * Waits until no account is on the webhook work list: each one there costs the dispatcher a claim script and an SREM
 * at its next poll, which a test counting the commands of some Checks would otherwise count. A Check writes no event,
 * so the list stays empty while those Checks run.
 */
export async function untilWebhookWorkDone(redis: Redis, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await redis.scard(redisKeys.webhookAccounts())) > 0) {
    if (Date.now() > deadline) throw new Error('the webhook dispatcher left accounts on its work list');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
