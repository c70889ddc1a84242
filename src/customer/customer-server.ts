import fastifyCookie from '@fastify/cookie';
import fastifyCsrfProtection from '@fastify/csrf-protection';
import fastifySession from '@fastify/session';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { CustomerSignInSettings } from '../platform/settings';
import { CUSTOMER_CALLBACK_PATH } from '../platform/settings';
import { StoreUnavailableError } from '../ports/store';
import { describeRoute, registerApiDocument, UNDESCRIBED } from '../http/openapi';
import { CUSTOMER_API_PREFIX } from './customer-api';
import { registerCustomerDashboard } from './customer-dashboard';
import type { CustomerServerDeps } from './customer-deps';
import {
  CSRF_FORM_FIELD,
  noAccessPage,
  notConfiguredPage,
  PAGE_SECURITY_HEADERS,
  problemPage,
  signedInPage,
  signedOutPage,
  signInFailedPage,
  type Page,
} from './customer-pages';
import './customer-request';
import {
  LAST_SEEN_GRANULARITY_MS,
  PENDING_LOGIN_TTL_MS,
  pendingLoginsWithRoom,
  signedInState,
  type SessionLifetime,
} from '../http/sign-in/sign-in-session';
import { OidcRelyingParty, SignInRefused, type RelyingParty } from '../http/sign-in/oidc-relying-party';
import { sessionStoreOver } from '../http/sign-in/session-store-adapter';

export type { CustomerServerDeps } from './customer-deps';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when this request found its session past its idle or maximum age (and ended it). */
    customerSessionEnded: 'idle' | 'max_age' | undefined;
  }
  interface FastifyContextConfig {
    /** The route authenticates its caller itself (a signature): the session, Origin and CSRF checks skip it. */
    ownAuthentication?: boolean;
  }
}

/** The header an API call carries its CSRF token in (a page's form sends the CSRF_FORM_FIELD field instead). */
export const CSRF_HEADER = 'x-csrf-token';
/** `__Host-`: the browser accepts it only with Secure, Path=/ and no Domain, so no other host can set or shadow it. */
export const SECURE_SESSION_COOKIE = '__Host-gwa_session';
/** Plain-HTTP localhost development (CUSTOMER_PLAIN_HTTP_LOCALHOST) cannot use the `__Host-` prefix. */
export const PLAIN_HTTP_SESSION_COOKIE = 'gwa_session';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The customer dashboard: its own HTTP listener (CUSTOMER_PORT), apart from
 * the admin API. People sign in with OpenID Connect (src/http/sign-in/); their
 * session id is in a cookie and the session itself in the session storage, so
 * any replica serves it. Every request gets `request.customerIdentity` (the
 * signed-in person, or undefined).
 *
 * Cross-site request forgery, three layers, each enough on its own for a
 * current browser:
 * 1. the session cookie is SameSite=Lax: a cross-site POST carries no session;
 * 2. every state-changing request (any method but GET, HEAD, OPTIONS) must
 *    carry an `Origin` header equal to the dashboard's public origin;
 * 3. every state-changing request in a signed-in session must carry the
 *    session's CSRF token (@fastify/csrf-protection): the `x-csrf-token`
 *    header for API calls, the `_csrf` field for the page's sign-out form.
 */
export async function buildCustomerServer(deps: CustomerServerDeps): Promise<FastifyInstance> {
  // Fastify's own request logging is off: callback URLs carry authorization codes.
  // trustProxy: the dashboard sits behind a TLS-terminating proxy, and Secure cookies are only set on requests it marks https.
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024, trustProxy: true });
  app.decorateRequest('customerIdentity', undefined);
  app.decorateRequest('customerSessionEnded', undefined);
  registerFormBodyParser(app);
  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, request, reply) => {
    if (error.code === 'FST_CSRF_INVALID_TOKEN' || error.code === 'FST_CSRF_MISSING_SECRET') {
      return refuse(
        request,
        reply,
        403,
        'csrf_token_invalid',
        'The CSRF token does not belong to this session. Reload the page and try again.',
      );
    }
    if (error instanceof StoreUnavailableError) {
      deps.logger.error({ event: 'customer_dashboard', detail: error.message }, 'customer dashboard: store unavailable');
      return refuse(request, reply, 503, 'store_unavailable', 'The dashboard cannot reach its data store right now. Try again shortly.');
    }
    if (error.statusCode && error.statusCode < 500) {
      return refuse(request, reply, error.statusCode, 'bad_request', `Bad request: ${error.message}`);
    }
    deps.logger.error({ event: 'customer_dashboard', err: error }, 'customer dashboard request failed');
    return refuse(request, reply, 500, 'internal_error', 'Internal error.');
  });
  app.setNotFoundHandler((request, reply) =>
    refuse(request, reply, 404, 'not_found', `There is no ${request.method} ${request.url.split('?')[0]} here.`),
  );

  await deps.registerSignedEndpoints?.(app);
  if (!deps.signIn) {
    registerNotConfigured(app);
    return app;
  }
  await registerSignIn(app, deps, deps.signIn);
  await deps.registerApi?.(app);
  return app;
}

/** No identity provider: every page says so, and the API answers a clear error instead of a login loop. */
function registerNotConfigured(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config?.ownAuthentication) return undefined;
    if (isApiRequest(request)) {
      return sendError(
        reply,
        503,
        'sign_in_not_configured',
        'Customer sign-in is not configured on this server (no OIDC_ISSUER_URL), so the customer API is unavailable. The operator dashboard and admin API are unaffected.',
      );
    }
    return sendPage(reply, notConfiguredPage());
  });
}

async function registerSignIn(app: FastifyInstance, deps: CustomerServerDeps, signIn: CustomerSignInSettings): Promise<void> {
  const { clock, logger } = deps;
  const lifetime: SessionLifetime = { idleMs: signIn.sessionIdleMs, maxAgeMs: signIn.sessionMaxAgeMs };
  const secure = !signIn.plainHttpLocalhost;
  const cookieName = secure ? SECURE_SESSION_COOKIE : PLAIN_HTTP_SESSION_COOKIE;
  const cookieOptions = { path: '/', httpOnly: true, secure, sameSite: 'lax' as const };
  const relyingParty: RelyingParty = deps.relyingParty ?? new OidcRelyingParty(signIn);

  // First, so that it sees every route; served by the admin listener (CUSTOMER_API_DOCUMENT_PATH).
  await registerApiDocument(app, {
    title: 'gateway-authz customer API',
    description:
      'What the customer dashboard calls, for a person signed in with OpenID Connect: their accounts, keys, members, usage and ' +
      `audit trail, under ${CUSTOMER_API_PREFIX} on the customer listener. Any call but GET also needs the Origin header of the dashboard ` +
      `and the session's CSRF token in '${CSRF_HEADER}' (from GET /auth/session). Errors answer {"error": {"code", "message", "field"?}}.`,
    securitySchemes: { session: { type: 'apiKey', in: 'cookie', name: cookieName, description: 'The session cookie set at sign-in.' } },
  });

  await app.register(fastifyCookie);
  await app.register(fastifySession, {
    secret: signIn.sessionSecret,
    cookieName,
    // No Max-Age: the cookie lasts the browser session; the server decides when the session ends.
    cookie: cookieOptions,
    store: sessionStoreOver(deps.sessions, clock, lifetime),
    // Nothing is stored (and no cookie set) for a visitor until they start signing in.
    saveUninitialized: false,
    rolling: false,
  });
  await app.register(fastifyCsrfProtection, { sessionPlugin: '@fastify/session', getToken: csrfTokenOf });

  // Runs after the session plugin's own onRequest hook, which loaded request.session.
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config?.ownAuthentication) return undefined;
    if (!SAFE_METHODS.has(request.method) && request.headers.origin !== signIn.publicOrigin) {
      logger.warn(
        { event: 'customer_cross_site_refused', method: request.method, path: request.url.split('?')[0] },
        'cross-site request refused',
      );
      return refuse(
        request,
        reply,
        403,
        'cross_site_request',
        `This request did not come from the dashboard's own pages (its Origin is not ${signIn.publicOrigin}), so it was refused.`,
      );
    }
    const now = clock.now();
    const state = signedInState(request.session, now, lifetime);
    if (state.kind === 'signed_in') {
      request.customerIdentity = state.identity;
      if (now - (request.session.lastSeenAtMs ?? 0) >= LAST_SEEN_GRANULARITY_MS) request.session.lastSeenAtMs = now;
    } else if (state.kind === 'ended') {
      // A fresh, empty session takes its place: the old one is deleted from the storage and its cookie cleared.
      await request.session.regenerate();
      request.customerSessionEnded = state.reason;
      logger.info({ event: 'customer_session_ended', reason: state.reason }, 'customer session ended');
    }
    if (request.routeOptions.config?.signedInPage && !request.customerIdentity) {
      return reply.redirect(request.customerSessionEnded ? `/?ended=${request.customerSessionEnded}` : '/', 303);
    }
    if (isApiRequest(request) && !request.customerIdentity) {
      return request.customerSessionEnded
        ? sendError(reply, 401, 'session_expired', 'Your session has ended. Sign in again.')
        : sendError(reply, 401, 'not_signed_in', 'Sign in first.');
    }
    return undefined;
  });

  // After the body is parsed, so a form's token field can be read.
  app.addHook('preHandler', (request, reply, done) => {
    // Without a signed-in session, a request can do nothing a forger could not do directly.
    if (SAFE_METHODS.has(request.method) || !request.customerIdentity || request.routeOptions.config?.ownAuthentication) return done();
    if (!csrfTokenOf(request)) {
      refuse(
        request,
        reply,
        403,
        'csrf_token_missing',
        `A change needs the session's CSRF token (the '${CSRF_HEADER}' header). Reload the page and try again.`,
      );
      return undefined;
    }
    return app.csrfProtection(request, reply, done);
  });

  const plainHttpRefusal = (request: FastifyRequest, reply: FastifyReply) =>
    secure && request.protocol !== 'https'
      ? sendPage(
          reply,
          problemPage(
            400,
            'This dashboard needs HTTPS',
            'The request reached the dashboard over plain HTTP, so its Secure session cookie cannot be set. Serve it over HTTPS (a proxy in front must send X-Forwarded-Proto: https), or for development on this machine set CUSTOMER_PLAIN_HTTP_LOCALHOST=true.',
          ),
        )
      : undefined;

  app.get('/', { schema: UNDESCRIBED }, async (request, reply) => {
    const identity = request.customerIdentity;
    if (!identity) {
      const ended = request.customerSessionEnded ?? (request.query as { ended?: string }).ended;
      return sendPage(reply, signedOutPage(ended));
    }
    const memberships = await deps.memberships.membershipsOf(identity);
    const csrfToken = reply.generateCsrf();
    if (memberships.length === 0) return sendPage(reply, noAccessPage(identity, csrfToken));
    const named = await Promise.all(
      memberships.map(async (membership) => ({ ...membership, name: await deps.memberships.accountNameOf?.(membership.accountId) })),
    );
    return sendPage(reply, signedInPage(identity, named, csrfToken));
  });

  registerCustomerDashboard(app);

  app.get('/auth/login', { schema: UNDESCRIBED }, async (request, reply) => {
    if (request.customerIdentity) return reply.redirect('/', 303);
    const refusal = plainHttpRefusal(request, reply);
    if (refusal) return refusal;
    const now = clock.now();
    let login;
    try {
      login = await relyingParty.beginLogin(now);
    } catch (error) {
      const refused =
        error instanceof SignInRefused ? error : new SignInRefused('provider_unreachable', 'The identity provider cannot be reached.');
      logger.warn({ event: 'customer_sign_in_refused', reason: refused.reason, ...refused.detail }, 'customer sign-in could not start');
      return sendPage(reply, signInFailedPage(502, refused.message));
    }
    request.session.pendingLogins = [...pendingLoginsWithRoom(request.session.pendingLogins, now), login.pending];
    return reply.header('cache-control', 'no-store').redirect(login.authorizationUrl, 303);
  });

  app.get(CUSTOMER_CALLBACK_PATH, { schema: UNDESCRIBED }, async (request, reply) => {
    const refusal = plainHttpRefusal(request, reply);
    if (refusal) return refusal;
    const queryStart = request.url.indexOf('?');
    const callbackQuery = queryStart === -1 ? '' : request.url.slice(queryStart);
    const state = new URLSearchParams(callbackQuery).get('state');
    const pendingLogins = request.session.pendingLogins ?? [];
    const pending = state === null ? undefined : pendingLogins.find((login) => login.state === state);
    const refuseSignIn = (refused: SignInRefused) => {
      logger.warn({ event: 'customer_sign_in_refused', reason: refused.reason, ...refused.detail }, 'customer sign-in refused');
      // This page's own URL holds the code: its links must not pass it on.
      reply.header('referrer-policy', 'no-referrer');
      return sendPage(reply, signInFailedPage(refused.reason === 'provider_unreachable' ? 502 : 400, refused.message));
    };
    if (!pending) {
      return refuseSignIn(
        new SignInRefused(
          'unknown_sign_in',
          'This answer from the identity provider does not match a sign-in started in this browser (it was changed, already used, or meant for another browser).',
        ),
      );
    }
    // Each pending sign-in completes at most once, whatever the outcome.
    request.session.pendingLogins = pendingLogins.filter((login) => login !== pending);
    const now = clock.now();
    if (now - pending.startedAtMs >= PENDING_LOGIN_TTL_MS) {
      return refuseSignIn(new SignInRefused('sign_in_expired', 'This sign-in took too long to come back from the identity provider.'));
    }
    let identity;
    try {
      identity = await relyingParty.completeLogin(callbackQuery, pending);
    } catch (error) {
      return refuseSignIn(
        error instanceof SignInRefused ? error : new SignInRefused('provider_unreachable', 'The sign-in could not be completed.'),
      );
    }
    // A new session id at sign-in: an id planted before it (session fixation) is worth nothing after.
    await request.session.regenerate();
    request.session.identity = identity;
    request.session.signedInAtMs = now;
    request.session.lastSeenAtMs = now;
    logger.info({ event: 'customer_sign_in', issuer: identity.issuer, subject: identity.subject }, 'customer signed in');
    return reply.redirect('/', 303);
  });

  app.post('/auth/logout', { schema: UNDESCRIBED }, async (request, reply) => {
    if (request.customerIdentity) {
      const { issuer, subject } = request.customerIdentity;
      await request.session.destroy();
      reply.clearCookie(cookieName, cookieOptions);
      logger.info({ event: 'customer_sign_out', issuer, subject }, 'customer signed out');
    }
    return reply.redirect('/?ended=signed_out', 303);
  });

  /** For the dashboard's scripts: who is signed in, on which accounts, and the CSRF token for their API calls. */
  app.get(
    '/auth/session',
    { schema: describeRoute({ summary: 'Who is signed in, their accounts, and the CSRF token for changes', tags: ['session'] }) },
    async (request, reply) => {
      const identity = request.customerIdentity;
      if (!identity) {
        return request.customerSessionEnded
          ? sendError(reply, 401, 'session_expired', 'Your session has ended. Sign in again.')
          : sendError(reply, 401, 'not_signed_in', 'Sign in first.');
      }
      const memberships = await deps.memberships.membershipsOf(identity);
      return reply.header('cache-control', 'no-store').send({ identity, memberships, csrfToken: reply.generateCsrf() });
    },
  );
}

/** The CSRF token: the header for API calls, or the hidden field of a page's form. */
function csrfTokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers[CSRF_HEADER];
  if (typeof header === 'string' && header !== '') return header;
  const field = (request.body as Record<string, unknown> | undefined)?.[CSRF_FORM_FIELD];
  return typeof field === 'string' && field !== '' ? field : undefined;
}

/** The sign-out form posts application/x-www-form-urlencoded; URLSearchParams reads it (no prototype keys: a null-prototype object). */
function registerFormBodyParser(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [name, value] of new URLSearchParams(body as string)) fields[name] = value;
    done(null, fields);
  });
}

function isApiRequest(request: FastifyRequest): boolean {
  const path = request.url.split('?')[0] ?? '';
  return path === '/api' || path.startsWith('/api/') || path === '/auth/session';
}

function sendPage(reply: FastifyReply, page: Page): FastifyReply {
  return reply
    .code(page.status)
    .headers({ ...PAGE_SECURITY_HEADERS, ...reply.getHeaders() })
    .type('text/html; charset=utf-8')
    .send(page.html);
}

function sendError(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ error: { code, message } });
}

/** JSON for API calls, a page for a browser's navigation or form. */
function refuse(request: FastifyRequest, reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  if (isApiRequest(request)) return sendError(reply, status, code, message);
  const title = status === 403 ? 'Refused' : status === 404 ? 'Not found' : status >= 500 ? 'Something went wrong' : 'Bad request';
  return sendPage(reply, problemPage(status, title, message));
}
