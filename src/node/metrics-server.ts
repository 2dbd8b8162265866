import http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from '../log/logger.js';
import { accessRefusal } from './access-token.js';
import { closeServer, listen, sendJson } from './http-server.js';

/** The Prometheus scrape endpoint. */
export const METRICS_PATH = '/metrics';

/** Answers a request for METRICS_PATH with the registry's text exposition (GET and HEAD). */
export async function serveMetrics(req: http.IncomingMessage, res: http.ServerResponse, registry: Registry): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: `${METRICS_PATH} takes GET, not ${req.method}` });
  const body = Buffer.from(await registry.metrics());
  res.writeHead(200, { 'content-type': registry.contentType, 'content-length': body.length, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

export interface MetricsServerOptions {
  readonly host: string;
  readonly port: number;
  /** Required on every request when set; without it the server must be on loopback (checkListenAccess). */
  readonly token: string | undefined;
  readonly registry: Registry;
  readonly log: Logger;
}

export interface MetricsServer {
  /** Where the metrics are, e.g. http://127.0.0.1:9464/metrics. */
  readonly url: string;
  close(): Promise<void>;
}

/** Serves only `GET /metrics` (what `cohort run` and `cohort swarm start` open on --metrics-port), behind the dashboard's access rule. */
export async function startMetricsServer({ host, port, token, registry, log }: MetricsServerOptions): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://metrics.invalid');
    const refusal = accessRefusal(req, url, token);
    if (refusal) return sendJson(res, refusal[0], { error: refusal[1] });
    if (url.pathname !== METRICS_PATH) return sendJson(res, 404, { error: `not found: this server serves only ${METRICS_PATH}` });
    serveMetrics(req, res, registry).catch((err: unknown) => {
      log.error({ err }, `metrics: ${req.method} ${req.url} failed`);
      if (!res.headersSent) sendJson(res, 500, { error: `internal error: ${(err as Error).message}` });
      else res.end();
    });
  });
  const base = await listen(server, host, port, 'the metrics server');
  return { url: `${base}${METRICS_PATH}`, close: () => closeServer(server) };
}
