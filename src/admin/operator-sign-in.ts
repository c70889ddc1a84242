import fastifyCookie from '@fastify/cookie';
import fastifyCsrfProtection from '@fastify/csrf-protection';
import fastifySession from '@fastify/session';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CustomerIdentity } from '../accounts/customer-identity';
import { describeRoute, UNDESCRIBED } from '../http/openapi';
import { OidcRelyingParty, SignInRefused } from '../http/sign-in/oidc-relying-party';
import { sessionStoreOver } from '../http/sign-in/session-store-adapter';
import {
  LAST_SEEN_GRANULARITY_MS,
  PENDING_LOGIN_TTL_MS,
  pendingLoginsWithRoom,
  signedInState,
  type SessionLifetime,
} from '../http/sign-in/sign-in-session';
import { OPERATOR_ROLES, type OperatorRole } from '../operators/operator-permissions';
import { permissionsOf, operatorActorOf, type OperatorPrincipal } from '../operators/operator-principal';
import type { Clock } from '../platform/clock';
import type { Logger } from '../platform/logger';
import { OPERATOR_CALLBACK_PATH, rolesFromClaim } from '../platform/operator-sign-in-settings';
import { sendAdminError } from './admin-errors';
import type { OperatorSignInDeps } from './admin-deps';

declare module 'fastify' {
  interface FastifyRequest {
    /** The operator signed in to the dashboard by this request's session cookie; undefined without one. */
    operatorSession: Extract<OperatorPrincipal, { kind: 'person' }> | undefined;
  }
}

/** The header the dashboard sends its session's CSRF token in, on every change. */
export const OPERATOR_CSRF_HEADER = 'x-csrf-token';
/** `__Host-`: only this host can set it, on every path. Apart from the customer dashboard's cookie (another listener). */
export const SECURE_OPERATOR_COOKIE = '__Host-gwa_operator_session';
export const PLAIN_HTTP_OPERATOR_COOKIE = 'gwa_operator_session';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const LOGIN_PATH = '/dashboard/auth/login';
const LOGOUT_PATH = '/dashboard/auth/logout';
const SESSION_PATH = '/dashboard/auth/session';
/** Public: it says whether the caller's own cookie holds a session, and hands its CSRF token only to that session. */
const SESSION_DESCRIPTION = describeRoute({
  summary: "The operator dashboard's sign-in session: who, with which roles and permissions, and its CSRF token",
  tags: ['session'],
  public: true,
});

/**
 * Operator sign-in to the operator dashboard with OpenID Connect, on the
 * admin listener: the same relying party and sessions as the customer
 * dashboard (src/http/sign-in/), with its own client, cookie, session keys and
 * lifetimes. A person's roles come from the configured claim, mapped at
 * sign-in; none mapped, no sign-in. A signed-in request becomes
 * `request.operatorSession`, which the admin authentication takes as the
 * principal when no bearer token is sent. Cookie-authenticated changes must
 * come from the dashboard's own origin (Origin header) and carry the
 * session's CSRF token, as on the customer side; the cookie is SameSite=Lax.
 *
 * Registered before the admin authentication hook, so the session is loaded when it runs.
 */
export function registerOperatorSignIn(app: FastifyInstance, deps: OperatorSignInDeps, clock: Clock, logger: Logger): void {
  const { settings } = deps;
  const lifetime: SessionLifetime = { idleMs: settings.sessionIdleMs, maxAgeMs: settings.sessionMaxAgeMs };
  const secure = !settings.plainHttpLocalhost;
  const cookieName = secure ? SECURE_OPERATOR_COOKIE : PLAIN_HTTP_OPERATOR_COOKIE;
  const cookieOptions = { path: '/', httpOnly: true, secure, sameSite: 'lax' as const };
  const relyingParty = deps.relyingParty ?? new OidcRelyingParty(settings, [settings.rolesClaim]);

  app.decorateRequest('operatorSession', undefined);
  void app.register(fastifyCookie);
  void app.register(fastifySession, {
    secret: settings.sessionSecret,
    cookieName,
    cookie: cookieOptions,
    store: sessionStoreOver(deps.sessions, clock, lifetime),
    saveUninitialized: false,
    rolling: false,
  });
  void app.register(fastifyCsrfProtection, { sessionPlugin: '@fastify/session', getToken: (request) => csrfTokenOf(request) });

  app.addHook('onRequest', async (request) => {
    const now = clock.now();
    const state = signedInState(request.session, now, lifetime);
    if (state.kind === 'signed_in') {
      const roles = (request.session.operatorRoles ?? []).filter((role): role is OperatorRole =>
        (OPERATOR_ROLES as readonly string[]).includes(role),
      );
      request.operatorSession = personOf(state.identity, roles);
      if (now - (request.session.lastSeenAtMs ?? 0) >= LAST_SEEN_GRANULARITY_MS) request.session.lastSeenAtMs = now;
    } else if (state.kind === 'ended') {
      await request.session.regenerate();
      logger.info({ event: 'operator_session_ended', reason: state.reason }, 'operator session ended');
    }
  });

  // Cookie-authenticated changes only: a bearer token is not sent by a browser on its own, so it needs neither check.
  app.addHook('preHandler', (request, reply, done) => {
    if (SAFE_METHODS.has(request.method) || !request.operatorSession || request.headers.authorization !== undefined) return done();
    if (request.headers.origin !== settings.publicOrigin) {
      logger.warn({ event: 'operator_cross_site_refused', method: request.method }, 'cross-site operator request refused');
      sendAdminError(
        reply,
        403,
        'forbidden',
        `This request did not come from the operator dashboard (its Origin is not ${settings.publicOrigin}).`,
      );
      return undefined;
    }
    if (!csrfTokenOf(request)) {
      sendAdminError(
        reply,
        403,
        'forbidden',
        `A change needs the session's CSRF token (the '${OPERATOR_CSRF_HEADER}' header). Reload the page.`,
      );
      return undefined;
    }
    return app.csrfProtection(request, reply, done);
  });

  const back = (reply: FastifyReply, outcome: string) =>
    reply.header('cache-control', 'no-store').redirect(`/dashboard?sign_in=${outcome}`, 303);

  app.get(LOGIN_PATH, { config: { public: true }, schema: UNDESCRIBED }, async (request, reply) => {
    if (request.operatorSession) return reply.redirect('/dashboard', 303);
    if (secure && request.protocol !== 'https') return back(reply, 'needs_https');
    const now = clock.now();
    let login;
    try {
      login = await relyingParty.beginLogin(now);
    } catch (error) {
      const refused = error instanceof SignInRefused ? error : new SignInRefused('provider_unreachable', 'unreachable');
      logger.warn({ event: 'operator_sign_in_refused', reason: refused.reason, ...refused.detail }, 'operator sign-in could not start');
      return back(reply, 'provider_unreachable');
    }
    request.session.pendingLogins = [...pendingLoginsWithRoom(request.session.pendingLogins, now), login.pending];
    return reply.header('cache-control', 'no-store').redirect(login.authorizationUrl, 303);
  });

  app.get(OPERATOR_CALLBACK_PATH, { config: { public: true }, schema: UNDESCRIBED }, async (request, reply) => {
    // This page's own URL holds the code: what it leads to must not pass it on.
    reply.header('referrer-policy', 'no-referrer');
    const queryStart = request.url.indexOf('?');
    const callbackQuery = queryStart === -1 ? '' : request.url.slice(queryStart);
    const state = new URLSearchParams(callbackQuery).get('state');
    const pendingLogins = request.session.pendingLogins ?? [];
    const pending = state === null ? undefined : pendingLogins.find((login) => login.state === state);
    const refuse = (reason: string, detail: Record<string, string> = {}) => {
      logger.warn({ event: 'operator_sign_in_refused', reason, ...detail }, 'operator sign-in refused');
      return back(reply, reason);
    };
    if (!pending) return refuse('unknown_sign_in');
    request.session.pendingLogins = pendingLogins.filter((login) => login !== pending);
    const now = clock.now();
    if (now - pending.startedAtMs >= PENDING_LOGIN_TTL_MS) return refuse('sign_in_expired');
    let signedIn;
    try {
      signedIn = await relyingParty.completeLoginWithClaims(callbackQuery, pending);
    } catch (error) {
      const refused = error instanceof SignInRefused ? error : new SignInRefused('provider_unreachable', 'failed');
      return refuse(refused.reason, refused.detail);
    }
    const roles = rolesFromClaim(signedIn.claims[settings.rolesClaim], settings.roleMap);
    const { issuer, subject } = signedIn.identity;
    if (roles.length === 0) return refuse('no_operator_role', { issuer, subject });
    // A new session id at sign-in: an id planted before it (session fixation) is worth nothing after.
    await request.session.regenerate();
    request.session.identity = signedIn.identity;
    request.session.operatorRoles = roles;
    request.session.signedInAtMs = now;
    request.session.lastSeenAtMs = now;
    logger.info({ event: 'operator_sign_in', issuer, subject, roles }, 'operator signed in');
    return reply.redirect('/dashboard', 303);
  });

  app.post(LOGOUT_PATH, { config: { public: true }, schema: UNDESCRIBED }, async (request, reply) => {
    if (request.operatorSession) {
      const { issuer, subject } = request.operatorSession;
      await request.session.destroy();
      reply.clearCookie(cookieName, cookieOptions);
      logger.info({ event: 'operator_sign_out', issuer, subject }, 'operator signed out');
    }
    return reply.code(204).send();
  });

  /** For the dashboard's script: who is signed in, what they may do, and the CSRF token for their changes. */
  app.get(SESSION_PATH, { config: { public: true }, schema: SESSION_DESCRIPTION }, async (request, reply) => {
    const operator = request.operatorSession;
    // 200 either way: the page asks on every load, and being signed out is no error.
    if (!operator) return reply.header('cache-control', 'no-store').send({ signedIn: false, signInOffered: true });
    return reply.header('cache-control', 'no-store').send({
      signedIn: true,
      operator: operatorActorOf(operator),
      displayName: operator.displayName ?? null,
      roles: operator.roles,
      permissions: permissionsOf(operator),
      csrfToken: reply.generateCsrf(),
    });
  });
}

function personOf(identity: CustomerIdentity, roles: readonly OperatorRole[]): Extract<OperatorPrincipal, { kind: 'person' }> {
  return {
    kind: 'person',
    issuer: identity.issuer,
    subject: identity.subject,
    ...(identity.displayName ? { displayName: identity.displayName } : {}),
    roles,
  };
}

function csrfTokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers[OPERATOR_CSRF_HEADER];
  return typeof header === 'string' && header !== '' ? header : undefined;
}

/** Without operator sign-in, the page's question still has an answer: nobody is signed in, and no sign-in is offered. */
export function registerSignInNotOffered(app: FastifyInstance): void {
  app.get(SESSION_PATH, { config: { public: true }, schema: SESSION_DESCRIPTION }, async (_request, reply) =>
    reply.header('cache-control', 'no-store').send({ signedIn: false, signInOffered: false }),
  );
}
