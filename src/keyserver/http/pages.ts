/**
 * The HTML of the verification link. GET shows a page with ONE button and
 * verifies nothing: mail scanners and link previewers fetch links, and must
 * not confirm an address on the owner's behalf. Only the POST sent by that
 * button verifies. The pages hold no secret: the form posts back to the same
 * URL (no token in the page), and the address is shown masked. Pages show
 * the published key's fingerprint laid out as `stash vault identity show`
 * prints it, by the vault's pure fingerprint-display.ts (the key server loads
 * only the vault's pure formats, never the agent or the CLI).
 */
import { fingerprintLines } from '../../vault/fingerprint-display.js';
import type { VerificationView } from '../service.js';

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const style = `body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}button{font-size:1.1rem;padding:.6rem 1.4rem;border-radius:.4rem;border:1px solid #245;background:#2a5db0;color:#fff;cursor:pointer}
.muted{color:#666;font-size:.9rem}.fp{font-family:ui-monospace,monospace;font-size:1.3rem;letter-spacing:.05em}\npre{font-size:1.1rem}`;

/** Content-Security-Policy of every page: no scripts, no external anything, forms only to us. */
export const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** A whole page: the title as its heading, then `body` (HTML the caller escaped). */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${style}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

export function until(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
}

/**
 * The key being vouched for, grouped as `stash vault identity show` prints it
 * (the same fingerprintLines), so the owner of the address can check that
 * the key is theirs before confirming.
 */
function fingerprintBlock(fingerprint: string): string {
  return `<p>Fingerprint of the published key:</p>
<p class="fp" id="fingerprint">${escapeHtml(fingerprint)}</p>
<pre id="fingerprint-groups">${escapeHtml(fingerprintLines(fingerprint).join('\n'))}</pre>`;
}

export function confirmPage(v: VerificationView): string {
  return page(
    'Confirm your email address',
    `<p>Someone published a stash public key for <strong>${escapeHtml(v.maskedEmail)}</strong> and asked to prove that this address belongs to them.</p>
${fingerprintBlock(v.fingerprint)}
<p>If that was you, compare this fingerprint with the one <code>stash vault identity show</code> prints, then confirm below. Until you do, nobody can fetch the key.</p>
<form method="post"><button type="submit" id="confirm">Confirm my address</button></form>
<p class="muted">If you did not publish a key, or the fingerprint differs, do not confirm: the request expires at ${escapeHtml(until(v.expiresAt))}.</p>`,
  );
}

export function confirmedPage(v: VerificationView): string {
  return page(
    'Address confirmed',
    `<p id="confirmed">Thank you: <strong>${escapeHtml(v.maskedEmail)}</strong> is confirmed. Your share code can now be fetched until ${escapeHtml(until(v.expiresAt))}.</p>
${fingerprintBlock(v.fingerprint)}
<p class="muted">You can close this page.</p>`,
  );
}

/** A link opened again after its confirmation. */
export function alreadyConfirmedPage(v: VerificationView): string {
  return page(
    'Already confirmed',
    `<p id="already-confirmed"><strong>${escapeHtml(v.maskedEmail)}</strong> was already confirmed with this link at ${escapeHtml(until(v.verifiedAt))}. Nothing more to do: the share code can be fetched until ${escapeHtml(until(v.expiresAt))}.</p>
${fingerprintBlock(v.fingerprint)}
<p class="muted">You can close this page.</p>`,
  );
}

export function invalidLinkPage(): string {
  return page(
    'Link not valid',
    '<p id="invalid">This verification link is unknown or has expired.</p><p class="muted">If you confirmed it earlier, nothing more is needed. Otherwise publish your key again to get a new link.</p>',
  );
}

/** GET / in a browser: what this server is. */
export function homePage(): string {
  return page(
    'stash key server',
    `<p id="home">This is a key server of <strong>stash</strong>, a secrets vault. It passes public keys from one stash user to another; the <code>stash</code> command line talks to it (<code>stash vault identity publish</code>, <code>stash vault contact receive</code>).</p>
<p class="muted">There is nothing to do here in a browser. The verification links this server emails open a page of their own. To delete a key published for your address before it expires: <a href="/manage">/manage</a>.</p>`,
  );
}

/** Any other unknown path in a browser. */
export function notFoundPage(): string {
  return page(
    'Page not found',
    '<p id="not-found">There is no page at this address.</p><p class="muted">This is a stash key server; <a href="/">what that is</a>.</p>',
  );
}

export function errorPage(title: string, message: string): string {
  return page(title, `<p>${escapeHtml(message)}</p>`);
}
