import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/** DECISION_LOG_SAMPLE=0: no line for an allowed decision, every denial still logged, every decision still counted. */
let server: AppUnderTest;
let client: OfficialCheckClient;
let key: string;

const chat = (credential: string) =>
  envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${credential}` } });

beforeAll(async () => {
  server = await startAppUnderTest({ env: { DECISION_LOG_SAMPLE: '0' } });
  client = createOfficialCheckClient(server.grpcAddress);
  await server.admin('POST', '/admin/accounts', { id: 'sampled', name: 'Sampled' });
  key = (await server.admin('POST', '/admin/accounts/sampled/keys', {})).body.key;
});
afterAll(async () => {
  client?.close();
  await server?.close();
});

it('logs denials only, and counts everything', async () => {
  for (let i = 0; i < 5; i += 1) expect((await client.check(chat(key))).status.code).toBe(0);
  expect((await client.check(chat('gk_live_notAValidKey'))).status.code).toBe(16);
  const lines = server.logs.events('decision');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({ result: 'deny', reason: 'malformed_key' });
  const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
  expect(metrics).toContain('gateway_authz_decisions_total{style="chat",family="chat-completions",result="allow",reason="allowed"} 5');
});
