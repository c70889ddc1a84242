import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/** Envoy's cluster health check and Kubernetes gRPC probes call grpc.health.v1.Health/Check. */
function healthClient(address: string) {
  const definition = protoLoader.loadSync(protoPath, { keepCase: true, enums: String });
  const Health = (grpc.loadPackageDefinition(definition) as any).grpc.health.v1.Health as grpc.ServiceClientConstructor;
  const client = new Health(address, grpc.credentials.createInsecure()) as any;
  const check = (service: string) =>
    new Promise<any>((resolve, reject) =>
      client.Check({ service }, { deadline: Date.now() + 2000 }, (error: unknown, response: unknown) =>
        error ? reject(error) : resolve(response),
      ),
    );
  return { check, close: () => client.close() };
}

let server: AppUnderTest;
beforeAll(async () => {
  server = await startAppUnderTest({});
});
afterAll(async () => {
  await server?.close();
});

it('answers SERVING for the whole server and for the Authorization service', async () => {
  const client = healthClient(server.grpcAddress);
  try {
    expect(await client.check('')).toEqual({ status: 'SERVING' });
    expect(await client.check('envoy.service.auth.v3.Authorization')).toEqual({ status: 'SERVING' });
    await expect(client.check('no.such.Service')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
  } finally {
    client.close();
  }
});
