import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import { trainingMetrics } from '../collab/index.js';
import { metricsRegistry } from '../util/prometheus.js';
import { nodeStoreOptions, openStore, type Store } from '../store/index.js';
import type { NodeController } from './controller.js';
import type { MakeNodeParts } from '../training/service.js';
import { createNodeController } from './host.js';
import { checkListenAccess } from './access-token.js';
import { startDashboardServer } from './dashboard-server.js';
import { PACKAGE_INFO } from './package-info.js';

/** The built renderer, shared with the desktop app (scripts/build.mjs writes it). */
const RENDERER_DIR = fileURLToPath(new URL('../../out/renderer', import.meta.url));

export interface HeadlessNode {
  readonly url: string;
  readonly store: Store;
  readonly controller: NodeController;
  stop(): Promise<void>;
}

/** Starts the headless node: opens the store, runs the controller and serves the dashboard and its API. */
export async function startHeadlessNode(config: Config, log: Logger, parts?: MakeNodeParts, rendererDir = RENDERER_DIR): Promise<HeadlessNode> {
  const token = config.dashboardToken === '' ? undefined : config.dashboardToken;
  checkListenAccess(config.dashboardHost, token, '--dashboard-host', '--dashboard-token (or set COHORT_DASHBOARD_TOKEN)');
  const store = openStore(config.dataDir, nodeStoreOptions(config.moveAside, log));
  log.info(`data directory ${config.dataDir} (database ${store.file})`);
  const controller = createNodeController({ store, log, version: PACKAGE_INFO.version, licence: PACKAGE_INFO.license, parts });
  let server;
  try {
    server = await startDashboardServer({ host: config.dashboardHost, port: config.dashboardPort, token, rendererDir, api: controller, log, metrics: metricsRegistry(trainingMetrics(store), { processMetrics: true }) });
  } catch (err) {
    await controller.close();
    store.close();
    throw err;
  }
  if (!fs.existsSync(path.join(rendererDir, 'index.html'))) {
    log.warn(`the dashboard is not built (${rendererDir} has no index.html): run \`npm run build\` (npm start does it); the API works meanwhile`);
  }
  return {
    url: server.url,
    store,
    controller,
    stop: async () => {
      await server.close();
      await controller.close();
      store.close();
    },
  };
}
