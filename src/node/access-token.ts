import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ConfigError } from '../config/load.js';

export const TOKEN_COOKIE = 'cohort_token';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '::1', '[::1]', 'localhost']);

function isLoopbackHost(host: string): boolean {
  return LOOPBACK_HOSTS.has(host.toLowerCase());
}

/**
 * The rule of every HTTP server Cohort runs (dashboard, /metrics): without a token it may only listen
 * on loopback. `hostFlag` and `tokenFlag` name what the user sets, for the error.
 */
export function checkListenAccess(host: string, token: string | undefined, hostFlag: string, tokenFlag: string): void {
  if (token === undefined && !isLoopbackHost(host)) {
    throw new ConfigError(hostFlag, `${host}: serving beyond loopback needs an access token; pass ${tokenFlag}, or use 127.0.0.1, ::1 or localhost`);
  }
}

/** Compares in constant time (over fixed-length digests, so the token's length does not leak either). */
function tokensEqual(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token a request carries: `Authorization: Bearer …`, the dashboard's cookie, or `?token=` (first visit). */
export function presentedToken(req: IncomingMessage, url: URL): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice('Bearer '.length).trim();
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === TOKEN_COOKIE) return decodeURIComponent(value.join('='));
  }
  return url.searchParams.get('token') ?? undefined;
}

/**
 * Why a request is refused, as [status, message], or undefined when it may go on. With a token every
 * request must present it; without one only loopback Host names are served (a page on another site
 * that rebinds its DNS name to 127.0.0.1 still sends its own Host header, which is refused here).
 */
export function accessRefusal(req: IncomingMessage, url: URL, token: string | undefined): readonly [status: 401 | 403, message: string] | undefined {
  if (token === undefined) {
    const hostname = (req.headers.host ?? '').replace(/:\d+$/, '');
    return isLoopbackHost(hostname) ? undefined : [403, `refused: Host "${req.headers.host ?? ''}" is not a loopback address`];
  }
  const given = presentedToken(req, url);
  if (given === undefined || !tokensEqual(given, token)) return [401, 'this server needs its access token: send "Authorization: Bearer <token>" or open it with ?token=<token>'];
  return undefined;
}
