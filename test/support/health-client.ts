import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

interface HealthServiceClient extends grpc.Client {
  Watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
  Check(
    request: { service: string },
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response: { status: string }) => void,
  ): grpc.ClientUnaryCall;
}

/** A grpc.health.v1 client, as Envoy's cluster health check and Kubernetes gRPC probes use it. */
export function healthClient(address: string) {
  const definition = protoLoader.loadSync(protoPath, { keepCase: true, enums: String });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const client = new loaded.grpc.health.v1.Health(address, grpc.credentials.createInsecure()) as unknown as HealthServiceClient;
  const check = (service = '') =>
    new Promise<{ status: string }>((resolve, reject) =>
      client.Check({ service }, { deadline: Date.now() + 2000 }, (error, response) => (error ? reject(error) : resolve(response))),
    );
  /** Health/Watch: every status the server sends, and how the call ended (once it has). */
  const watch = (service = '') => {
    const call = client.Watch({ service });
    const statuses: string[] = [];
    let ended: grpc.StatusObject | undefined;
    call.on('data', (response: { status: string }) => statuses.push(response.status));
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => (ended = status));
    return { statuses, ended: () => ended, cancel: () => call.cancel() };
  };
  return { check, watch, close: () => client.close() };
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
