import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { FREE_PORT_RANGE, freePort } from './free-port';

describe('freePort', () => {
  it('gives loopback ports below the ephemeral range, that can be listened on, and not the same one each time', async () => {
    const ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(1024);
      expect(port).toBeLessThan(ephemeralStart);
    }
    expect(new Set(ports).size).toBeGreaterThan(1);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(ports[0], '127.0.0.1', resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });

  it('passes over a port something already listens on', async () => {
    const taken = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
    const size = FREE_PORT_RANGE.last - FREE_PORT_RANGE.first + 1;
    const pick = (p: number) => (p - FREE_PORT_RANGE.first + 0.5) / size;
    const other = port === FREE_PORT_RANGE.first ? port + 1 : port - 1;
    // The first random choice is the taken port, the second its neighbour.
    const random = jest.spyOn(Math, 'random').mockReturnValueOnce(pick(port)).mockReturnValueOnce(pick(other));
    try {
      expect(await freePort()).toBe(other);
      expect(random).toHaveBeenCalledTimes(2);
    } finally {
      random.mockRestore();
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
