import fs from 'node:fs';
import http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from '../log/logger.js';
import type { CohortApi } from '../shared/api.js';
import { EVENTS_PATH, httpRoute, isMethodName } from '../shared/channels.js';
import { TOKEN_COOKIE, accessRefusal, presentedToken } from './access-token.js';
import { ApiRequestError, dispatch } from './api-dispatch.js';
import { closeServer, listen, sendJson } from './http-server.js';
import { METRICS_PATH, serveMetrics } from './metrics-server.js';
import { resolveStatic } from './static-files.js';

/** Largest request body the API accepts (settings patches are a few hundred bytes). */
const MAX_BODY_BYTES = 64 * 1024;
/** SSE comment sent this often so proxies and browsers keep the stream open. */
const HEARTBEAT_MS = 15_000;
/** Open event streams at most (a few tabs and tools; more is a leak or abuse). */
const MAX_STREAMS = 32;

/** Same policy as the renderer's own meta tag; sent as a header too so it also covers the fallback page. */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
const SECURITY_HEADERS = { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' };

export interface DashboardServerOptions {
  readonly host: string;
  readonly port: number;
  /** Required on every request when set; without it the server must be on loopback. */
  readonly token: string | undefined;
  /** The built renderer (out/renderer); when it is missing, a page says how to build it. */
  readonly rendererDir: string;
  readonly api: CohortApi;
  readonly log: Logger;
  /** The metrics served on `GET /metrics` (absent: 404). */
  readonly metrics?: Registry;
}

export interface DashboardServer {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves the dashboard and the API: `GET|POST /api/<verb>` (JSON), `GET /api/events` (Server-Sent
 * Events, one `snapshot` event per change), `GET /metrics` (Prometheus text; behind the same token)
 * and the renderer's static files.
 */
export async function startDashboardServer(options: DashboardServerOptions): Promise<DashboardServer> {
  const { api, log, token } = options;
  const streams = new Set<http.ServerResponse>();
  const unsubscribe = api.subscribe((snapshot) => {
    const frame = `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
    for (const res of streams) res.write(frame);
  });
  const heartbeat = setInterval(() => {
    for (const res of streams) res.write(': keep-alive\n\n');
  }, HEARTBEAT_MS);
  heartbeat.unref();

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err }, `dashboard: ${req.method} ${req.url} failed`);
      if (!res.headersSent) sendJson(res, 500, { error: `internal error: ${(err as Error).message}` });
      else res.end();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const refusal = accessRefusal(req, url, token);
    if (refusal) return sendJson(res, refusal[0], { error: refusal[1] });
    if (token !== undefined && url.searchParams.has('token')) {
      // first visit with ?token=: keep it in a cookie and drop it from the address bar
      res.writeHead(303, { location: url.pathname, 'set-cookie': `${TOKEN_COOKIE}=${encodeURIComponent(presentedToken(req, url) ?? '')}; HttpOnly; SameSite=Strict; Path=/` }).end();
      return;
    }
    if (url.pathname === EVENTS_PATH) return openEventStream(res);
    if (url.pathname === METRICS_PATH) return options.metrics ? serveMetrics(req, res, options.metrics) : sendJson(res, 404, { error: 'this node serves no metrics' });
    if (url.pathname.startsWith('/api/')) return handleApi(req, res, url.pathname.slice('/api/'.length));
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: `${req.method} is not allowed here` });
    return serveStatic(req, res, url.pathname);
  }

  async function openEventStream(res: http.ServerResponse): Promise<void> {
    if (streams.size >= MAX_STREAMS) return sendJson(res, 503, { error: `too many open event streams (${MAX_STREAMS}); close other dashboard tabs` });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    streams.add(res);
    res.on('close', () => streams.delete(res));
    res.write(`event: snapshot\ndata: ${JSON.stringify(await api.getSnapshot())}\n\n`);
  }

  async function handleApi(req: http.IncomingMessage, res: http.ServerResponse, method: string): Promise<void> {
    if (!isMethodName(method)) return sendJson(res, 404, { error: `unknown API method "${method}"` });
    const route = httpRoute(method);
    if (req.method !== route.verb) return sendJson(res, 405, { error: `${route.path} takes ${route.verb}, not ${req.method}` });
    let input: unknown;
    if (route.verb === 'POST') {
      // JSON only: a cross-site form or no-cors fetch cannot send this content type without a preflight, which is never granted
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) return sendJson(res, 415, { error: `${route.path} takes a JSON body (content-type: application/json)` });
      const body = await readBody(req);
      if (body === undefined) return sendJson(res, 413, { error: `request body over ${MAX_BODY_BYTES} bytes` });
      try {
        input = body.length === 0 ? undefined : JSON.parse(body);
      } catch (err) {
        return sendJson(res, 400, { error: `${route.path}: body is not valid JSON (${(err as Error).message})` });
      }
    }
    try {
      sendJson(res, 200, await dispatch(api, method, input));
    } catch (err) {
      if (err instanceof ApiRequestError) return sendJson(res, 400, { error: err.message });
      throw err;
    }
  }

  function serveStatic(req: http.IncomingMessage, res: http.ServerResponse, pathname: string): void {
    if (!fs.existsSync(`${options.rendererDir}/index.html`)) {
      res.writeHead(503, { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS }).end(notBuiltPage(options.rendererDir));
      return;
    }
    const found = resolveStatic(options.rendererDir, pathname);
    if (!found.found) return sendJson(res, found.status, { error: found.status === 400 ? 'bad path' : 'not found' });
    const body = fs.readFileSync(found.file);
    res.writeHead(200, { 'content-type': found.contentType, 'content-length': body.length, 'cache-control': 'no-cache', ...SECURITY_HEADERS });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  const url = await listen(server, options.host, options.port, 'dashboard');
  return {
    url,
    close: async () => {
      unsubscribe();
      clearInterval(heartbeat);
      for (const res of streams) res.end();
      await closeServer(server);
    },
  };
}

/** The body as text, or undefined when it exceeds MAX_BODY_BYTES. */
async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function notBuiltPage(dir: string): string {
  return `<!doctype html><html lang="en"><meta charset="utf-8"><title>Cohort</title><body style="font-family:system-ui;max-width:48rem;margin:2rem auto"><h1>Cohort node</h1><p>The node is running, but the dashboard is not built (${escapeHtml(dir)} has no index.html). Run <code>npm run build</code> (<code>npm start</code> does it for you) and reload. The API is available under <code>/api/</code>.</p></body></html>`;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
