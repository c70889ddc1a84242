import escapeHtml from 'escape-html';
import type { CustomerIdentity, Membership } from '../accounts/customer-identity';
import { CUSTOMER_STYLESHEET } from './customer-dashboard';

/**
 * The customer dashboard's server-rendered pages: sign in, the signed-in
 * overview, "no access", and the plain explanations when something is not
 * possible. They look like the API Keys page (its shared stylesheet, its top
 * bar). No script and no inline style anywhere; every value that came from
 * outside (names, emails, ids) goes through escapeHtml.
 */

/** Pages are plain documents: nothing loads but this server's stylesheet, only the sign-out form posts, and only here. */
export const CUSTOMER_PAGE_CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const PAGE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CUSTOMER_PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  // Not no-referrer: with it, Chromium sends `Origin: null` on the page's own form posts, which the Origin check refuses.
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** The form field that carries the CSRF token when a page's form posts (an API call sends the header). */
export const CSRF_FORM_FIELD = '_csrf';

export interface Page {
  status: number;
  html: string;
}

/**
 * `styled`: links the API Keys page's stylesheet. Not where the server serves
 * nothing but this page (sign-in not set up), so it would not load.
 */
function page(status: number, title: string, body: string, styled = true): Page {
  const stylesheet = styled ? `<link rel="stylesheet" href="${CUSTOMER_STYLESHEET}">\n` : '';
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · API dashboard</title>
${stylesheet}</head>
<body>
<header class="topbar"><span class="brand">API dashboard</span></header>
<main>
<section class="card narrow">
<h1>${escapeHtml(title)}</h1>
${body}
</section>
</main>
</body>
</html>
`;
  return { status, html };
}

function signOutForm(csrfToken: string): string {
  return `<form method="post" action="/auth/logout">
<input type="hidden" name="${CSRF_FORM_FIELD}" value="${escapeHtml(csrfToken)}">
<button type="submit">Sign out</button>
</form>`;
}

function who(identity: CustomerIdentity): string {
  const name = identity.displayName ?? identity.subject;
  return `<p data-testid="signed-in-as">Signed in as <strong>${escapeHtml(name)}</strong> (${escapeHtml(identity.issuer)})</p>`;
}

export function notConfiguredPage(): Page {
  return page(
    503,
    'Customer sign-in is not set up',
    `<p>This dashboard signs customers in with their organisation's identity provider (OpenID Connect), and none is configured yet.</p>
<p>Operators: set <code>OIDC_ISSUER_URL</code>, <code>OIDC_CLIENT_ID</code>, <code>OIDC_REDIRECT_URL</code> and <code>CUSTOMER_SESSION_SECRET</code> (see docs/concepts/customer-dashboard.md). The operator dashboard on the admin port works as before.</p>`,
    false,
  );
}

const ENDED_MESSAGES: Readonly<Record<string, string>> = {
  idle: 'Your session ended because it was not used for a while. Sign in again to continue.',
  max_age: 'Your session reached its maximum length. Sign in again to continue.',
  signed_out: 'You are signed out.',
};

export function signedOutPage(ended?: string): Page {
  const notice =
    ended && ENDED_MESSAGES[ended] ? `<p role="status" class="notice" data-testid="notice">${ENDED_MESSAGES[ended]}</p>\n` : '';
  return page(
    200,
    'Sign in',
    `${notice}<p>Sign in with your organisation's account to manage its API keys.</p>
<p><a href="/auth/login">Sign in with your identity provider</a></p>`,
  );
}

function roleWords(membership: Membership): string {
  switch (membership.role) {
    case 'owner':
      return 'owner (keys and members)';
    case 'developer':
      return 'developer (keys)';
    case 'viewer':
      return 'viewer (sees keys and usage)';
  }
}

/**
 * One link per account, by its name (the id beside it when they differ), straight to that account's keys: a person in
 * several accounts picks one here rather than on the keys page.
 */
export function signedInPage(
  identity: CustomerIdentity,
  memberships: readonly (Membership & { name?: string | undefined })[],
  csrfToken: string,
): Page {
  const items = memberships
    .map((membership) => {
      const id = membership.accountId;
      const name = membership.name ?? id;
      const label = name === id ? escapeHtml(id) : `${escapeHtml(name)} (${escapeHtml(id)})`;
      const href = `/keys?account=${encodeURIComponent(id)}`;
      return `<li data-account-id="${escapeHtml(id)}"><a href="${escapeHtml(href)}" data-testid="open-account-keys"><strong>${label}</strong></a>: ${escapeHtml(roleWords(membership))}</li>`;
    })
    .join('\n');
  return page(
    200,
    'Your accounts',
    `${who(identity)}
<h2>Accounts you can act on</h2>
<ul data-testid="accounts">
${items}
</ul>
<p>Open an account's API Keys to create, regenerate and revoke keys, and see their usage, or <a href="/keys" data-testid="open-keys">open API Keys</a> for the first.</p>
${signOutForm(csrfToken)}`,
  );
}

export function noAccessPage(identity: CustomerIdentity, csrfToken: string): Page {
  const address = identity.verifiedEmail ? ` or your email address <strong>${escapeHtml(identity.verifiedEmail)}</strong>` : '';
  return page(
    403,
    'No access',
    `${who(identity)}
<p data-testid="no-access">You are not a member of any account here, so there is nothing to show.</p>
<p>Ask an owner of your organisation's account (or the operator) to add you as a member: they need your sign-in identity, issuer <code>${escapeHtml(identity.issuer)}</code> and subject <code>${escapeHtml(identity.subject)}</code>${address}.</p>
${signOutForm(csrfToken)}`,
  );
}

export function signInFailedPage(status: number, message: string): Page {
  return page(
    status,
    'Sign-in did not complete',
    `<p class="alert" data-testid="error">${escapeHtml(message)}</p>
<p>Nothing was signed in. <a href="/auth/login">Start a new sign-in</a></p>`,
  );
}

/** A refusal or failure outside sign-in (cross-site request, store down, unknown page). */
export function problemPage(status: number, title: string, message: string): Page {
  return page(
    status,
    title,
    `<p class="alert" data-testid="error">${escapeHtml(message)}</p>\n<p><a href="/">Back to the dashboard</a></p>`,
  );
}
