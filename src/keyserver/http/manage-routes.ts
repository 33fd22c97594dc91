/**
 * The routes of the manage link (withdraw.ts; docs/http-api.md, "Manage
 * link"): GET /manage asks for an address, POST /manage mails a link to it
 * when it has shares here, GET /manage/<token> shows them, POST
 * /manage/<token> deletes one (form field `code`) or all of them. Pages
 * only; failures on these paths are HTML too (answers.ts).
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import type { KeyServerBackend } from '../backend.js';
import { maskEmail, validateEmail } from '../validate.js';
import { HTML_CONTENT_TYPE } from './answers.js';
import { readBody } from './body.js';
import type { ClientAddress } from './client-address.js';
import { manageInvalidPage, manageRequestPage, manageRequestedPage, manageViewPage } from './manage-pages.js';
import { PAGE_CSP } from './pages.js';

export interface ManageRouteDeps {
  backend: KeyServerBackend;
  bodyLimit: number;
  bodyTimeoutMs: number;
}

type State = { client: ClientAddress };

function sendPage(ctx: Koa.Context, status: number, html: string): void {
  ctx.status = status;
  ctx.set('Content-Security-Policy', PAGE_CSP);
  ctx.set('X-Frame-Options', 'DENY');
  ctx.type = HTML_CONTENT_TYPE;
  ctx.body = html;
}

/** The fields of a form post (application/x-www-form-urlencoded, as browsers send it). */
async function readForm(ctx: Koa.Context, d: ManageRouteDeps): Promise<URLSearchParams> {
  return new URLSearchParams((await readBody(ctx.req, d.bodyLimit, d.bodyTimeoutMs)).toString('utf8'));
}

/** Adds the manage routes to `router`. */
export function manageRoutes(router: Router<State>, d: ManageRouteDeps): void {
  router.get('/manage', (ctx) => sendPage(ctx, 200, manageRequestPage()));

  router.post('/manage', async (ctx) => {
    const email = validateEmail((await readForm(ctx, d)).get('email') ?? '');
    await d.backend.requestManageLink(email, ctx.state.client.key);
    sendPage(ctx, 200, manageRequestedPage(maskEmail(email)));
  });

  router.get('/manage/:token', async (ctx) => {
    const view = await d.backend.manageView(ctx.params.token ?? '');
    sendPage(ctx, view ? 200 : 404, view ? manageViewPage(view) : manageInvalidPage());
  });

  router.post('/manage/:token', async (ctx) => {
    // Only the "delete all" form sends no code at all; an empty or mistyped one is refused (400), not taken for all.
    const code = (await readForm(ctx, d)).get('code') ?? undefined;
    const view = await d.backend.manageDelete(ctx.params.token ?? '', code, ctx.state.client.key);
    sendPage(ctx, view ? 200 : 404, view ? manageViewPage(view) : manageInvalidPage());
  });
}
