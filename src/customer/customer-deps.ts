import type { FastifyInstance } from 'fastify';
import type { Clock } from '../platform/clock';
import type { MembershipLookup } from '../accounts/customer-identity';
import type { SessionStorage } from '../http/sign-in/session-storage';
import type { Logger } from '../platform/logger';
import type { CustomerSignInSettings } from '../platform/settings';
import type { RelyingParty } from '../http/sign-in/oidc-relying-party';

/** What the customer dashboard's HTTP server is built from (app.ts wires it). */
export interface CustomerServerDeps {
  /** Absent: no identity provider is configured; the pages say so and the API answers 503. */
  signIn?: CustomerSignInSettings;
  sessions: SessionStorage;
  /** Which accounts a signed-in person may act on: none means the "no access" page. */
  memberships: MembershipLookup;
  clock: Clock;
  logger: Logger;
  /** The identity provider side; by default openid-client against signIn's issuer. */
  relyingParty?: RelyingParty;
  /**
   * Mounts the customer JSON API (under /api). It runs behind this server's
   * checks: every /api request has a signed-in `request.customerIdentity`,
   * and every state-changing one passed the Origin and CSRF token checks.
   */
  registerApi?: (app: FastifyInstance) => void | Promise<void>;
  /**
   * Mounts routes whose callers are machines that sign their requests (GitHub's secret-scanning alerts), marked
   * `ownAuthentication`: served with or without sign-in configured, outside the session, Origin and CSRF checks.
   */
  registerSignedEndpoints?: (app: FastifyInstance) => void | Promise<void>;
}
