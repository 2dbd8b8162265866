import { ConfigError } from '../config/load.js';
import { SETTINGS } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import { checkListenAccess } from '../node/access-token.js';
import { startMetricsServer, type MetricsServer } from '../node/metrics-server.js';
import { metricsRegistry, type MetricFamily } from '../util/prometheus.js';
import { intFlag } from './flags.js';

/** --help of the metrics flags `cohort run` and `cohort swarm start` share. */
export const METRICS_FLAG_HELP = {
  port: 'serve Prometheus metrics (this node’s, plus process CPU, memory, event loop and GC) on GET /metrics at this port (0 = any free port); default: not served',
  host: 'address the metrics server listens on (beyond loopback needs --metrics-token)',
  token: `access token /metrics requires (Authorization: Bearer …), as the dashboard’s; ${SETTINGS.dashboardToken.accepted ?? ''}`,
} as const;

export interface MetricsFlagValues {
  metricsPort?: string;
  metricsHost?: string;
  metricsToken?: string;
}

export interface MetricsEndpoint {
  readonly port: number;
  readonly host: string;
  readonly token: string | undefined;
}

/** The metrics server the flags ask for (undefined without --metrics-port); bad values throw a ConfigError naming the flag. */
export function metricsEndpoint(opts: MetricsFlagValues): MetricsEndpoint | undefined {
  const port = intFlag('--metrics-port', opts.metricsPort, 0, 65535);
  const host = opts.metricsHost ?? '127.0.0.1';
  const parsed = SETTINGS.dashboardToken.schema.safeParse(opts.metricsToken ?? '');
  if (!parsed.success) throw new ConfigError('--metrics-token', `invalid value; accepted: ${SETTINGS.dashboardToken.accepted ?? ''}`);
  const token = parsed.data === '' ? undefined : parsed.data;
  if (port === undefined) {
    if (opts.metricsHost !== undefined || token !== undefined) throw new ConfigError(opts.metricsHost !== undefined ? '--metrics-host' : '--metrics-token', 'needs --metrics-port');
    return undefined;
  }
  checkListenAccess(host, token, '--metrics-host', '--metrics-token');
  return { port, host, token };
}

/** Starts the metrics server for `families` and the process's own metrics, and says where it is. */
export async function serveNodeMetrics(endpoint: MetricsEndpoint, families: readonly MetricFamily[], log: Logger): Promise<MetricsServer> {
  const server = await startMetricsServer({ ...endpoint, registry: metricsRegistry(families, { processMetrics: true }), log });
  log.info(`Prometheus metrics on ${server.url}`);
  return server;
}
