/**
 * The HTML of the verification link. GET shows a page with ONE button and
 * verifies nothing: mail scanners and link previewers fetch links, and must
 * not confirm an address on the owner's behalf. Only the POST sent by that
 * button verifies. The pages hold no secret: the form posts back to the same
 * URL (no token in the page), and the address is shown masked.
 */

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const style = `body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}button{font-size:1.1rem;padding:.6rem 1.4rem;border-radius:.4rem;border:1px solid #245;background:#2a5db0;color:#fff;cursor:pointer}
.muted{color:#666;font-size:.9rem}`;

/** Content-Security-Policy of every page: no scripts, no external anything, forms only to us. */
export const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escape(title)}</title><style>${style}</style></head>
<body><h1>${escape(title)}</h1>
${body}
</body></html>
`;
}

function until(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

export function confirmPage(maskedEmail: string, expiresAt: number): string {
  return page(
    'Confirm your email address',
    `<p>Someone published a stash public key for <strong>${escape(maskedEmail)}</strong> and asked to prove that this address belongs to them.</p>
<p>If that was you, confirm below. Until you do, nobody can fetch the key.</p>
<form method="post"><button type="submit" id="confirm">Confirm my address</button></form>
<p class="muted">If you did not publish a key, ignore this page: the request expires at ${escape(until(expiresAt))}.</p>`,
  );
}

export function confirmedPage(maskedEmail: string, expiresAt: number): string {
  return page(
    'Address confirmed',
    `<p id="confirmed">Thank you: <strong>${escape(maskedEmail)}</strong> is confirmed. Your share code can now be fetched until ${escape(until(expiresAt))}.</p>
<p class="muted">You can close this page.</p>`,
  );
}

export function invalidLinkPage(): string {
  return page(
    'Link not valid',
    '<p id="invalid">This verification link is unknown, has already been used, or has expired.</p><p class="muted">Publish your key again to get a new link.</p>',
  );
}

export function errorPage(title: string, message: string): string {
  return page(title, `<p>${escape(message)}</p>`);
}
