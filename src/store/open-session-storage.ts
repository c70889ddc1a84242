import type { Clock } from '../platform/clock';
import type { SessionStorage } from '../customer/session-storage';
import type { Settings } from '../platform/settings';
import { MemorySessionStorage } from './memory-session-storage';
import { RedisSessionStorage } from './redis/redis-session-storage';

/** Customer sessions live where the keys do: in Redis when configured, otherwise in process. */
export async function openSessionStorage(settings: Settings, clock: Clock): Promise<SessionStorage> {
  if (!settings.redis) return new MemorySessionStorage(clock);
  return RedisSessionStorage.connect(settings.redis, settings.redisAdminTimeoutMs);
}
