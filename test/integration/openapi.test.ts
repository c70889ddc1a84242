/**
 * The OpenAPI 3.1 descriptions of the admin and customer APIs, as the real app serves them on the admin port: each
 * lists exactly the routes its listener registered (every Fastify instance the app creates records its routes through
 * an onRoute hook), but for the few routes that are not part of an API, named below.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import { DASHBOARD_ASSETS } from '../../src/admin/register-dashboard';
import { ADMIN_API_DOCUMENT_PATH, CUSTOMER_API_DOCUMENT_PATH } from '../../src/admin/routes/api-description';
import { CHART_LIBRARY_FILES, CUSTOMER_ASSETS, CUSTOMER_PAGE_PATH } from '../../src/customer/customer-dashboard';
import { CUSTOMER_CALLBACK_PATH } from '../../src/platform/settings';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';

/** Every route each Fastify instance registered, one list per instance, as `METHOD /path`. */
const mockRouteTables: string[][] = [];
jest.mock('fastify', () => {
  const actual = jest.requireActual<typeof import('fastify')>('fastify');
  const createFastify = actual.default as (...args: unknown[]) => FastifyInstance;
  const recordingFastify = (...args: unknown[]) => {
    const app = createFastify(...args);
    const routes: string[] = [];
    mockRouteTables.push(routes);
    app.addHook('onRoute', (route: RouteOptions) => {
      for (const method of [route.method].flat()) routes.push(`${method} ${route.url}`);
    });
    return app;
  };
  return { ...actual, __esModule: true, default: recordingFastify, fastify: recordingFastify };
});

const SESSION_SECRET = 'openapi-test-session-secret-0123456789abcdef';
const ORIGIN = 'https://console.example.com';

/**
 * The routes no description lists: the dashboards' pages and the files they load, and the browser's sign-in steps
 * (pages and redirects, not calls a program makes).
 */
const NOT_DESCRIBED = {
  admin: Object.keys(DASHBOARD_ASSETS).map((path) => `GET ${path}`),
  customer: [
    'GET /',
    `GET ${CUSTOMER_PAGE_PATH}`,
    ...Object.keys(CUSTOMER_ASSETS).map((path) => `GET ${path}`),
    ...Object.keys(CHART_LIBRARY_FILES).map((path) => `GET ${path}`),
    'GET /auth/login',
    `GET ${CUSTOMER_CALLBACK_PATH}`,
    'POST /auth/logout',
  ],
};

interface Operation {
  summary?: string;
  parameters?: { in: string; name: string; required?: boolean; schema?: object }[];
  requestBody?: { content: Record<string, { schema: { required?: string[]; additionalProperties?: unknown } }> };
  responses?: object;
  security?: object[];
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, object> };
  security: Record<string, string[]>[];
}

let server: AppUnderTest;
let adminRoutes: string[];
let customerRoutes: string[];

beforeAll(async () => {
  registerSecrets(SESSION_SECRET);
  server = await startAppUnderTest({
    env: {
      OIDC_ISSUER_URL: 'https://login.example.com',
      OIDC_CLIENT_ID: 'dashboard',
      OIDC_REDIRECT_URL: `${ORIGIN}/auth/callback`,
      CUSTOMER_SESSION_SECRET: SESSION_SECRET,
    },
  });
  // The admin listener is the one with /healthz, the customer listener the one with /auth/session.
  adminRoutes = mockRouteTables.find((routes) => routes.includes('GET /healthz'))!;
  customerRoutes = mockRouteTables.find((routes) => routes.includes('GET /auth/session'))!;
});

afterAll(async () => {
  await server?.close();
});

/** Fetched without the admin token: the descriptions hold no data. */
async function fetchDocument(path: string): Promise<OpenApiDocument> {
  const response = await fetch(`${server.adminUrl}${path}`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return (await response.json()) as OpenApiDocument;
}

/** `METHOD /path` of every operation, the path written as Fastify writes it (`:id`, not `{id}`). */
function operationsOf(document: OpenApiDocument): string[] {
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.keys(methods).map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
}

/** HEAD is served for every GET (Fastify's exposeHeadRoutes) and is not an operation of its own. */
function describable(routes: string[], notDescribed: string[]): string[] {
  return routes.filter((route) => !route.startsWith('HEAD ') && !notDescribed.includes(route)).sort();
}

/** What every OpenAPI 3.1 document must have, and what these two promise besides. */
function expectOpenApi31Shape(document: OpenApiDocument): void {
  expect(document.openapi).toBe('3.1.0');
  expect(typeof document.info.title).toBe('string');
  expect(document.info.version).toMatch(/^\d+\.\d+\.\d+/);
  expect(Object.keys(document.paths).length).toBeGreaterThan(0);
  for (const scheme of document.security.flatMap(Object.keys)) expect(document.components.securitySchemes[scheme]).toBeDefined();
  for (const [path, methods] of Object.entries(document.paths)) {
    expect(path).toMatch(/^\//);
    const templated = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]).sort();
    for (const [method, operation] of Object.entries(methods)) {
      expect(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']).toContain(method);
      expect(operation.summary).toEqual(expect.any(String));
      expect(operation.responses).toBeDefined();
      // Each {name} in the path is a required path parameter, and there is no other.
      const inPath = (operation.parameters ?? []).filter((parameter) => parameter.in === 'path');
      expect(inPath.map((parameter) => parameter.name).sort()).toEqual(templated);
      for (const parameter of inPath) expect(parameter.required).toBe(true);
    }
  }
}

describe('the admin API description', () => {
  let document: OpenApiDocument;
  beforeAll(async () => {
    document = await fetchDocument(ADMIN_API_DOCUMENT_PATH);
  });

  it('is an OpenAPI 3.1 document', () => {
    expectOpenApi31Shape(document);
  });

  it("lists exactly the admin listener's routes but the dashboard's page and files", () => {
    expect(adminRoutes).toEqual(expect.arrayContaining(NOT_DESCRIBED.admin));
    expect(operationsOf(document).sort()).toEqual(describable(adminRoutes, NOT_DESCRIBED.admin));
  });

  it('describes bodies and queries with the schemas the routes check them with', () => {
    const create = document.paths['/admin/accounts']!.post!.requestBody!.content['application/json']!.schema;
    expect(create.required).toEqual(['id', 'name']);
    expect(create.additionalProperties).toBe(false);
    const usage = document.paths['/admin/accounts/{id}/usage']!.get!.parameters!;
    expect(usage.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name)).toEqual([
      'from',
      'to',
      'granularity',
      'groupBy',
    ]);
  });

  it("asks for the admin token everywhere but on health, metrics, the descriptions and the dashboard's own session question", () => {
    expect(document.security).toEqual([{ adminToken: [] }]);
    expect(document.components.securitySchemes.adminToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    const open = Object.entries(document.paths)
      .filter(([, methods]) => Object.values(methods).some((operation) => operation.security?.length === 0))
      .map(([path]) => path)
      .sort();
    // /dashboard/auth/session answers about the caller's own session cookie, so it needs no token of its own.
    expect(open).toEqual(
      [ADMIN_API_DOCUMENT_PATH, CUSTOMER_API_DOCUMENT_PATH, '/dashboard/auth/session', '/healthz', '/metrics', '/readyz'].sort(),
    );
  });
});

describe('the customer API description', () => {
  let document: OpenApiDocument;
  beforeAll(async () => {
    document = await fetchDocument(CUSTOMER_API_DOCUMENT_PATH);
  });

  it('is an OpenAPI 3.1 document', () => {
    expectOpenApi31Shape(document);
  });

  it("lists exactly the customer listener's routes but its pages, their files and the sign-in steps", () => {
    expect(customerRoutes).toEqual(expect.arrayContaining(NOT_DESCRIBED.customer));
    expect(operationsOf(document).sort()).toEqual(describable(customerRoutes, NOT_DESCRIBED.customer));
  });

  it('asks for the session cookie', () => {
    expect(document.security).toEqual([{ session: [] }]);
    expect(document.components.securitySchemes.session).toMatchObject({ type: 'apiKey', in: 'cookie' });
  });
});

describe('without customer sign-in', () => {
  let plain: AppUnderTest;
  beforeAll(async () => {
    plain = await startAppUnderTest({});
  });
  afterAll(async () => {
    await plain?.close();
  });

  it('serves the admin description, and says why there is no customer one', async () => {
    expect((await fetch(`${plain.adminUrl}${ADMIN_API_DOCUMENT_PATH}`)).status).toBe(200);
    const customer = await fetch(`${plain.adminUrl}${CUSTOMER_API_DOCUMENT_PATH}`);
    expect(customer.status).toBe(404);
    expect(await customer.json()).toEqual({
      error: {
        code: 'customer_api_not_configured',
        message: 'The customer listener serves no API: customer sign-in is not configured (no OIDC_ISSUER_URL).',
      },
    });
  });
});
