import type { MetricsSource } from '../platform/worker-pool';
import type { AdminAuthLimits, AdminAuthMetrics } from './admin-auth-limits';
import type { Clock } from '../platform/clock';
import type { HealthMonitor } from '../platform/health-monitor';
import type { Logger } from '../platform/logger';
import type { Currency } from '../accounts/money';
import type { AdminStore, UsageReader } from '../ports/store';
import type { OperatorTokenStore } from '../ports/operator-tokens';
import type { OperatorSignInSettings } from '../platform/operator-sign-in-settings';
import type { SessionStorage } from '../http/sign-in/session-storage';
import type { ClaimsRelyingParty } from '../http/sign-in/oidc-relying-party';
import type { WebhookActionDeps } from '../webhooks/endpoint-actions';

/** What the admin HTTP server and its routes need; built by app.ts, read by the routes. */
export interface AdminServerDeps {
  store: AdminStore & UsageReader;
  clock: Clock;
  logger: Logger;
  /** The break-glass token (every permission, each use logged); absent: turned off. */
  adminToken?: string;
  /** Operator sign-in to the dashboard (OpenID Connect sessions); absent: not offered. */
  operatorSignIn?: OperatorSignInDeps;
  /** Operator API tokens, looked up on every request that presents one; absent: none is accepted. */
  operatorTokens?: OperatorTokenStore;
  /** Drives /readyz; absent means always ready (tests of the API alone). */
  health?: HealthMonitor;
  /** Served at /metrics for Prometheus: a prom-client Registry, or in a worker the sum over all workers. */
  metrics?: MetricsSource;
  /** Counts failed and refused admin authentications; absent: not counted. */
  authMetrics?: AdminAuthMetrics;
  /** Limits on failed admin authentications; absent: DEFAULT_ADMIN_AUTH_LIMITS. */
  authLimits?: AdminAuthLimits;
  /** How long a wrong admin token waits for its 401. */
  authFailureDelayMs?: number;
  /** What the amounts count, for the answers' formatted money; absent: DEFAULT_CURRENCY. */
  currency?: Currency;
  /**
   * The customer API's OpenAPI document, served at CUSTOMER_API_DOCUMENT_PATH; undefined while the customer listener
   * has no API (customer sign-in not configured). Absent: not served.
   */
  customerApiDocument?: () => unknown;
  /** Where webhook endpoints may point; absent: public https targets only, resolved by the system (STRICT_TARGETS). */
  webhookTargets?: WebhookActionDeps['targets'];
}

/** What operator sign-in is built from (app.ts wires it). */
export interface OperatorSignInDeps {
  settings: OperatorSignInSettings;
  /** The operator dashboard's own sessions (apart from the customer dashboard's). */
  sessions: SessionStorage;
  /** The identity provider side; by default openid-client against the settings' issuer. */
  relyingParty?: ClaimsRelyingParty;
}
