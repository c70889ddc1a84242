import { chatCheckRequest, createOfficialCheckClient, type OfficialCheckClient } from '../support/envoy-official-client';
import { ManualClock } from '../../src/platform/clock';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { mistyped } from '../support/mistyped';

/** gateway_authz_check_latency_seconds: one observation per decision, buckets up to 1 s. */
let server: AppUnderTest;
let client: OfficialCheckClient;
let key: string;

beforeAll(async () => {
  server = await startAppUnderTest({});
  client = createOfficialCheckClient(server.grpcAddress);
  await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' });
  key = (await server.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' })).body.key;
});

afterAll(async () => {
  client?.close();
  await server?.close();
});

async function scrape(): Promise<string> {
  return (await fetch(`${server.adminUrl}/metrics`)).text();
}

function sampleOf(text: string, series: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  if (!line) throw new Error(`no ${series} in /metrics`);
  return Number(line.split(' ')[1]);
}

function decisionsCounted(text: string): number {
  return text
    .split('\n')
    .filter((line) => line.startsWith('gateway_authz_decisions_total{'))
    .reduce((sum, line) => sum + Number(line.split(' ')[1]), 0);
}

it('counts every decision, allowed or denied, once, in buckets up to 1 s', async () => {
  const before = await scrape();
  expect(sampleOf(before, 'gateway_authz_check_latency_seconds_count')).toBe(0);
  const credentials = [key, key, key, mistyped(key), 'sk-ant-api03-notakey', ''];
  await Promise.all(credentials.map((credential) => client.check(chatCheckRequest(credential))));

  const after = await scrape();
  expect(sampleOf(after, 'gateway_authz_check_latency_seconds_count')).toBe(credentials.length);
  expect(decisionsCounted(after)).toBe(credentials.length);
  expect(sampleOf(after, 'gateway_authz_check_latency_seconds_bucket{le="1"}')).toBe(credentials.length);
  expect(sampleOf(after, 'gateway_authz_check_latency_seconds_bucket{le="0.0005"}')).toBeLessThanOrEqual(credentials.length);
  expect(sampleOf(after, 'gateway_authz_check_latency_seconds_sum')).toBeGreaterThan(0);
  expect(sampleOf(after, 'gateway_authz_checks_in_flight')).toBe(0);
});

it("judges Checks' deadlines on the system clock that the transport sets them on, not on the domain's clock", async () => {
  // A replica whose injected clock runs ten years ahead would otherwise find every Check past its deadline.
  const ahead = await startAppUnderTest({ clock: new ManualClock(Date.now() + 10 * 365 * 86_400_000) });
  const aheadClient = createOfficialCheckClient(ahead.grpcAddress);
  try {
    // Any deadline would be long past on the clock ten years ahead; 2 s leaves a loaded machine room to connect.
    const response = await aheadClient.check(chatCheckRequest(''), 2000);
    expect(response.denied_response.status.code).toBe('Unauthorized');
  } finally {
    aheadClient.close();
    await ahead.close();
  }
});
