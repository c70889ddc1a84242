/**
 * Redis commands a running replica sends whatever the traffic, and a test's
 * own bookkeeping: what a test that counts the commands of some requests
 * leaves out. The test's CONFIG RESETSTAT, INFO and MONITOR; the health
 * probe's PING (every HEALTH_INTERVAL_MS); the replica's sample of Redis's
 * clock, TIME, once a second (src/store/redis/redis-clock.ts).
 */
const BACKGROUND = /^(config|info|monitor|ping|time)(\||$)/i;

export function isBackgroundCommand(name: string): boolean {
  return BACKGROUND.test(name);
}
