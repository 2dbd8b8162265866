import { z } from 'zod';
import { ConfigError } from '../config/load.js';
import { SETTINGS } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import { checkListenAccess } from '../node/access-token.js';
import type { MetricsServer } from '../node/metrics-server.js';
import type { MetricFamily } from '../util/prometheus.js';
import { flagRow, type FlagValues } from './flag-table.js';

/** The metrics flags `cohort run` and `cohort swarm start` share. */
export const METRICS_FLAGS = {
  metricsPort: flagRow({ schema: SETTINGS.dashboardPort.schema, arg: '<port>', description: 'serve Prometheus metrics (this node’s, plus process CPU, memory, event loop and GC) on GET /metrics at this port (0 = any free port; its URL is printed on stdout); default: not served' }),
  metricsHost: flagRow({ schema: z.string().trim().min(1), arg: '<host>', description: 'address the metrics server listens on (beyond loopback needs --metrics-token; default 127.0.0.1)' }),
  metricsToken: flagRow({ schema: SETTINGS.dashboardToken.schema, arg: '<token>', accepted: SETTINGS.dashboardToken.accepted, description: 'access token /metrics requires (Authorization: Bearer …), as the dashboard’s' }),
};
type MetricsFlagValues = Partial<FlagValues<typeof METRICS_FLAGS>>;

export interface MetricsEndpoint {
  readonly port: number;
  readonly host: string;
  readonly token: string | undefined;
}

/** The metrics server the flags ask for (undefined without --metrics-port); bad values throw a ConfigError naming the flag. */
export function metricsEndpoint(opts: MetricsFlagValues): MetricsEndpoint | undefined {
  const port = opts.metricsPort;
  const host = opts.metricsHost ?? '127.0.0.1';
  const token = opts.metricsToken === '' ? undefined : opts.metricsToken;
  if (port === undefined) {
    if (opts.metricsHost !== undefined || token !== undefined) throw new ConfigError(opts.metricsHost !== undefined ? '--metrics-host' : '--metrics-token', 'needs --metrics-port');
    return undefined;
  }
  checkListenAccess(host, token, '--metrics-host', '--metrics-token');
  return { port, host, token };
}

/**
 * Starts the metrics server for `families` and the process's own metrics, and prints its URL on stdout
 * as the node's addresses are printed: with --metrics-port 0 it is the only place the port shows, so
 * no --log-level may hide it.
 */
export async function serveNodeMetrics(endpoint: MetricsEndpoint, families: readonly MetricFamily[], log: Logger): Promise<MetricsServer> {
  // loaded here, not with the flags: a command without --metrics-port (or only asked for --help) needs no HTTP server or prom-client
  const [{ startMetricsServer }, { metricsRegistry }] = await Promise.all([import('../node/metrics-server.js'), import('../util/prometheus.js')]);
  const server = await startMetricsServer({ ...endpoint, registry: metricsRegistry(families, { processMetrics: true }), log });
  process.stdout.write(`Prometheus metrics on ${server.url}\n`);
  return server;
}
