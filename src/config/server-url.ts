/**
 * The one rule for a key server base URL, wherever it comes from: `--server`,
 * STASH_KEY_SERVER_URL, `key_server_url` in the config file, or a server
 * learned from a topology (the client's failover cache). Pure, no imports:
 * the app config (app-config.ts), the CLI, the key server's client and the key
 * server's own options share it. It lives in src/config/ because the app config
 * checks key_server_url with it, and the key server may import src/config
 * (below it, like the agent and the CLI) but never the agent or the CLI.
 *
 * A base URL is `https://HOST[:PORT][/PATH]` (or `http://`, meant for a
 * server on this machine) with no user, password, query or fragment: the
 * client appends `/v1/...` to it, so anything after the path would be sent
 * somewhere it was never meant to go, and credentials would end up in
 * messages, `stash doctor` output and logs. Messages show the URL through
 * redactUrl, so a refused password is never printed.
 *
 * The spec calls a topology entry's URL and `--public-url` "the public
 * /v1/share base URL", so operators write a server both ways:
 * `https://keys.example.org` and `https://keys.example.org/v1/share`.
 * keyServerBase turns either into the base, and every place a server URL
 * comes in (server options, topology answers, the client's configuration
 * and cache) goes through it.
 */

/**
 * `raw` with its user information, query and fragment replaced by `***`, for
 * messages about a URL that may hold a secret. Cut to 100 characters.
 */
export function redactUrl(raw: string): string {
  let shown = raw;
  // user:password@ in the authority (before the first / ? or # after "//")
  shown = shown.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/*)([^/?#]*@)/, '$1***@');
  shown = shown.replace(/\?[^#]*/, '?***').replace(/#.*$/, '#***');
  return shown.length > 100 ? `${shown.slice(0, 100)}...` : shown;
}

/** The endpoint that all share requests go to, relative to the base URL. */
const SHARE_ENDPOINT = '/v1/share';

/**
 * The base URL of a key server URL written either way: without trailing
 * slashes, and without a final `/v1/share` path segment (a URL whose path
 * ends in `/v1/share` names the endpoint itself, not a folder the API lives
 * under). Only the path is looked at (`http://v1/share` is host v1, path
 * /share, and stays); anything that is no absolute URL loses only its
 * trailing slashes, and is for keyServerUrlProblem to refuse.
 */
export function keyServerBase(raw: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*)(\/[^?#]*)?$/.exec(raw);
  if (!m) return raw.replace(/\/+$/, '');
  let path = (m[2] ?? '').replace(/\/+$/, '');
  if (path.endsWith(SHARE_ENDPOINT)) path = path.slice(0, -SHARE_ENDPOINT.length).replace(/\/+$/, '');
  return m[1] + path;
}

/** Why `raw` is not a key server URL (a base, or the /v1/share endpoint: keyServerBase), or null when it is one. */
export function keyServerUrlProblem(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an https:// URL (http:// for a server on this machine) such as https://keys.example.org';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return 'must start with https:// (or http:// for a server on this machine), such as https://keys.example.org';
  }
  // `new URL` drops an empty "?" or "#" and an empty "@"; the text is checked too.
  const authority = /^[A-Za-z][A-Za-z0-9+.-]*:\/*([^/?#]*)/.exec(raw)?.[1] ?? '';
  if (url.username !== '' || url.password !== '' || authority.includes('@')) {
    return 'must not hold a user name or password (the key server needs none)';
  }
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) {
    return 'must be a base URL without a query or fragment';
  }
  if (url.hostname === '') return 'has no host name';
  return null;
}

/**
 * The base URL of `raw` (keyServerBase) when it is a key server URL; else
 * the error `fail` makes of "WHAT must ...; got "REDACTED"" (a UsageError for
 * a flag, a ConfigError for the environment and the config file).
 */
export function checkKeyServerUrl(raw: string, what: string, fail: (message: string) => Error): string {
  const problem = keyServerUrlProblem(raw);
  if (problem !== null) throw fail(`${what} ${problem}; got ${JSON.stringify(redactUrl(raw))}`);
  return keyServerBase(raw);
}
