/**
 * Publishes and confirmations on the fast path in front of Koa
 * (fast-fetch.ts): the other two requests of every share's life. Koa and its
 * router cost about as much CPU as node:http itself (Koa alone makes about
 * half of a bare server's requests/s), so a publish or a confirmation that
 * the app would answer from this server's own store is answered here with
 * the same bytes: the same backend calls, the same rate check, and answers
 * built by the same functions (answers.ts, pages.ts, the wire encoders).
 * What the app would forward to another server, and anything unusual about
 * the request, still goes to the app.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { KeyServerBackend } from '../backend.js';
import { encodeShareResponse, BINARY_MEDIA_TYPE, type CreatedResponse } from '../wire/messages.js';
import { shareResponseJson } from '../wire/json.js';
import { HTML_CONTENT_TYPE, JSON_CONTENT_TYPE, writeAnswer, type Answer } from './answers.js';
import { responseEncoding } from './negotiate.js';
import { PAGE_CSP, alreadyConfirmedPage, confirmedPage, invalidLinkPage } from './pages.js';

/** The verification link's path: /verify/ and a token as the server makes them (base64url); anything else goes to the app. */
const VERIFY_PATH = /^\/verify\/([A-Za-z0-9_-]{1,128})$/;

/** The token of a POST /verify/<token> the fast path answers, else undefined. */
export function verifyToken(url: string | undefined): string | undefined {
  return url === undefined ? undefined : VERIFY_PATH.exec(url)?.[1];
}

/** The 201 answer to a publish, as the app's route sends it. */
export function createdAnswer(req: IncomingMessage, created: CreatedResponse): Answer {
  if (responseEncoding(req.headers, 'POST') === 'json') {
    return { status: 201, headers: [], type: JSON_CONTENT_TYPE, body: JSON.stringify(shareResponseJson(created)) };
  }
  return { status: 201, headers: [], type: BINARY_MEDIA_TYPE, body: encodeShareResponse(created) };
}

/** A page with the headers every page of the app carries. */
function pageAnswer(status: number, html: string): Answer {
  return {
    status,
    headers: [
      ['Content-Security-Policy', PAGE_CSP],
      ['X-Frame-Options', 'DENY'],
    ],
    type: HTML_CONTENT_TYPE,
    body: html,
  };
}

/** Confirms `token` and writes the page the app's POST /verify/:token route would; failures go to `failed`. */
export function answerConfirm(
  backend: KeyServerBackend,
  token: string,
  res: ServerResponse,
  failed: (err: unknown) => void,
): void {
  backend.confirm(token).then((done) => {
    if (!done) writeAnswer(res, pageAnswer(404, invalidLinkPage()));
    else
      writeAnswer(
        res,
        pageAnswer(200, done.state === 'confirmed-now' ? confirmedPage(done) : alreadyConfirmedPage(done)),
      );
  }, failed);
}
