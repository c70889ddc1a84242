import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

/** A grpc.health.v1 client, as Envoy's cluster health check and Kubernetes gRPC probes use it. */
export function healthClient(address: string) {
  const definition = protoLoader.loadSync(protoPath, { keepCase: true, enums: String });
  const Health = (grpc.loadPackageDefinition(definition) as any).grpc.health.v1.Health as grpc.ServiceClientConstructor;
  const client = new Health(address, grpc.credentials.createInsecure()) as any;
  const check = (service = '') =>
    new Promise<{ status: string }>((resolve, reject) =>
      client.Check({ service }, { deadline: Date.now() + 2000 }, (error: unknown, response: { status: string }) =>
        error ? reject(error) : resolve(response),
      ),
    );
  return { check, close: () => client.close() };
}

/** Polls until the check says `status` or the time is up; returns the last answer. */
export async function waitForHealth(check: () => Promise<{ status: string }>, status: string, withinMs = 5000): Promise<string> {
  const deadline = Date.now() + withinMs;
  let last = '';
  while (Date.now() < deadline) {
    last = (await check().catch(() => ({ status: 'ERROR' }))).status;
    if (last === status) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return last;
}
