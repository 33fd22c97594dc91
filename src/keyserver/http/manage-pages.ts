/**
 * The HTML of the manage link (withdraw.ts), after Hagrid's: a form that
 * asks for the address, the answer (the same whether or not the address has
 * shares here), and the page of a mailed link, which lists the address's
 * shares with a button each and deletes nothing itself: mail scanners and
 * link previewers fetch links, so only the POST of a button deletes. Forms
 * post back to the same URL, so a page holds no token.
 */
import { fingerprintLines } from '../../vault/fingerprint-display.js';
import type { ManageView } from '../withdraw.js';
import { escapeHtml, page, until } from './pages.js';

/** GET /manage: asks for the address. */
export function manageRequestPage(): string {
  return page(
    'Delete a published key',
    `<p>A stash public key published on this server can be deleted before it expires by its publisher (<code>stash vault identity unpublish</code>) or by the owner of its email address.</p>
<form method="post"><p><label for="email">Your email address</label><br><input type="email" id="email" name="email" required maxlength="254" autocomplete="email"></p>
<button type="submit" id="request">Email me a link</button></form>
<p class="muted">If this server holds keys published for the address, a link to see and delete them is mailed to it. The link works for an hour.</p>`,
  );
}

/** POST /manage: the same answer whether or not the address has shares here. */
export function manageRequestedPage(maskedEmail: string): string {
  return page(
    'Check your email',
    `<p id="requested">If this server holds keys published for <strong>${escapeHtml(maskedEmail)}</strong>, a link to see and delete them was mailed to that address.</p>
<p class="muted">The link works for an hour. Nothing is mailed for an address without keys here.</p>`,
  );
}

/** GET /manage/<token>, and the answer of its buttons (what was deleted, what is left). */
export function manageViewPage(v: ManageView): string {
  const deleted =
    v.deleted.length > 0
      ? `<p id="deleted">Deleted: ${v.deleted.map((c) => `<code>${escapeHtml(c)}</code>`).join(', ')}. No server of this cluster hands ${v.deleted.length === 1 ? 'it' : 'them'} out any more.</p>\n`
      : '';
  if (v.shares.length === 0) {
    return page(
      'Your published keys',
      `${deleted}<p id="none">No key published for <strong>${escapeHtml(v.maskedEmail)}</strong> is held here (any more).</p>
<p class="muted">You can close this page.</p>`,
    );
  }
  const items = v.shares.map(
    (
      s,
    ) => `<li class="share"><p>Share code <code class="code">${escapeHtml(s.code)}</code>, ${s.state === 'pending' ? 'waiting for the address to be confirmed' : 'confirmed'}, expires ${escapeHtml(until(s.expiresAt))}</p>
<pre>${escapeHtml(fingerprintLines(s.fingerprint).join('\n'))}</pre>
<form method="post"><input type="hidden" name="code" value="${escapeHtml(s.code)}"><button type="submit">Delete this key</button></form></li>`,
  );
  return page(
    'Your published keys',
    `${deleted}<p>Keys published for <strong>${escapeHtml(v.maskedEmail)}</strong> on this server. Compare each fingerprint with the one <code>stash vault identity show</code> prints; delete any you did not publish or no longer want handed out.</p>
<ul id="shares">
${items.join('\n')}
</ul>
<form method="post"><button type="submit" id="delete-all">Delete all of them</button></form>
<p class="muted">This link works until ${escapeHtml(until(v.linkExpiresAt))}.</p>`,
  );
}

export function manageInvalidPage(): string {
  return page(
    'Link not valid',
    '<p id="invalid">This manage link is unknown or has expired.</p><p class="muted">Ask for a new one at <a href="/manage">/manage</a>.</p>',
  );
}
