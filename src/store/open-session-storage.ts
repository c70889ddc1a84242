import type { Clock } from '../platform/clock';
import type { SessionStorage } from '../http/sign-in/session-storage';
import type { Settings } from '../platform/settings';
import { MemorySessionStorage } from './memory-session-storage';
import { RedisSessionStorage } from './redis/redis-session-storage';
import { redisKeys } from './redis/redis-keys';

/** Dashboard sessions live where the keys do: in Redis when configured, otherwise in process; each dashboard's apart. */
export async function openSessionStorage(
  settings: Settings,
  clock: Clock,
  dashboard: 'customer' | 'operator' = 'customer',
): Promise<SessionStorage> {
  if (!settings.redis) return new MemorySessionStorage(clock);
  const keyOf = dashboard === 'customer' ? redisKeys.customerSession : redisKeys.operatorSession;
  return RedisSessionStorage.connect(settings.redis, settings.redisAdminTimeoutMs, keyOf);
}
