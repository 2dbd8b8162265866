import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../config/load.js';
import type { Config } from '../config/settings.js';
import type { Logger } from '../log/logger.js';
import { openStore, type Store } from '../store/index.js';

/** A part of the node runtime and whether this build has it yet. */
export interface ComponentStatus {
  readonly name: string;
  readonly available: boolean;
  readonly detail: string;
}

/** What the runtime can do in this version; the dashboard and `npm start` show it instead of failing silently. */
export const COMPONENTS: readonly ComponentStatus[] = [
  { name: 'store', available: true, detail: 'SQLite database: checkpoints, metrics, data cache, peers, settings' },
  { name: 'engine', available: false, detail: 'ALBERT training engine on onnxruntime-node: not in this version yet' },
  { name: 'data', available: false, detail: 'corpus, tokenizer and MLM/SOP batches: not in this version yet' },
  { name: 'swarm', available: false, detail: 'libp2p node and DHT records: run `cohort swarm start`; the headless node does not start one yet' },
  { name: 'collaborative training', available: false, detail: 'averaging and the collaborative optimizer: not in this version yet' },
];

export interface HeadlessNode {
  readonly url: string;
  readonly store: Store;
  stop(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Starts the headless node: opens the store and serves the status API and dashboard on loopback. */
export async function startHeadlessNode(config: Config, log: Logger): Promise<HeadlessNode> {
  if (!LOOPBACK.has(config.dashboardHost)) {
    throw new ConfigError('--dashboard-host', `${config.dashboardHost}: serving the dashboard beyond loopback needs an access token, which this version does not have yet; accepted: 127.0.0.1, ::1, localhost`);
  }
  const store = openStore(config.dataDir, { moveAside: config.moveAside, onMovedAside: (to, why) => log.warn({ movedTo: to }, `moved the unreadable database aside: ${why.message}`) });
  log.info(`data directory ${config.dataDir} (database ${store.file})`);
  const server = http.createServer((req, res) => {
    if (req.url === '/api/status') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ components: COMPONENTS }));
      return;
    }
    if (req.url === '/' || req.url === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'" }).end(statusPage());
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`dashboard cannot listen on ${config.dashboardHost}:${config.dashboardPort}: ${err.message}`)));
    server.listen(config.dashboardPort, config.dashboardHost, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.dashboardHost.includes(':') ? `[${config.dashboardHost}]` : config.dashboardHost}:${port}`;
  for (const c of COMPONENTS.filter((c) => !c.available)) log.warn(`${c.name}: ${c.detail}`);
  return {
    url,
    store,
    stop: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      store.close();
    },
  };
}

function statusPage(): string {
  const rows = COMPONENTS.map((c) => `<tr><td>${c.name}</td><td>${c.available ? 'ready' : 'not yet'}</td><td>${c.detail}</td></tr>`).join('');
  return `<!doctype html><html lang="en"><meta charset="utf-8"><title>Cohort</title><body style="font-family:system-ui;max-width:48rem;margin:2rem auto"><h1>Cohort node</h1><p>This node is running headless. The full dashboard arrives with the desktop app.</p><table>${rows}</table></body></html>`;
}
