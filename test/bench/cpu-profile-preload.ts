/**
 * Preloaded into the gateway by cpu-profile.ts (`node --require`): SIGUSR2
 * starts the V8 CPU profiler in process (and, with ALLOCATION_PROFILE_FILE,
 * the sampling heap profiler), the next SIGUSR2 stops them and writes the
 * profiles, so they cover only the measured window (not start-up, seeding or
 * warm-up). The gateway itself handles no SIGUSR2.
 */
import * as fs from 'node:fs';
import { Session } from 'node:inspector';

const cpuFile = process.env.CPU_PROFILE_FILE ?? 'gateway.cpuprofile';
const allocationFile = process.env.ALLOCATION_PROFILE_FILE;
const intervalMicros = Number(process.env.CPU_PROFILE_INTERVAL_US ?? '250');
const session = new Session();
session.connect();
let running = false;

function post(method: string, params: object = {}): Promise<unknown> {
  return new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
}

async function start(): Promise<void> {
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: intervalMicros });
  await post('Profiler.start');
  if (allocationFile) {
    // Objects a scavenge or mark-compact collected are counted too: what the GC has to do, not what stays.
    await post('HeapProfiler.startSampling', {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
}

async function stop(): Promise<void> {
  const { profile } = (await post('Profiler.stop')) as { profile: unknown };
  fs.writeFileSync(cpuFile, JSON.stringify(profile));
  if (allocationFile) {
    const sampled = (await post('HeapProfiler.getSamplingProfile')) as { profile: unknown };
    await post('HeapProfiler.stopSampling');
    fs.writeFileSync(allocationFile, JSON.stringify(sampled.profile));
  }
}

process.on('SIGUSR2', () => {
  running = !running;
  (running ? start() : stop()).catch((error: unknown) => fs.writeFileSync(`${cpuFile}.error`, String(error)));
});
