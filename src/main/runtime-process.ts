// The node runtime inside Electron's utility process, off the UI thread: opens the store, runs the
// controller and answers main over the parent port (see runtime-rpc.ts).
import { resolveConfig } from '../config/load.js';
import { createLogger } from '../log/logger.js';
import { dispatch } from '../node/api-dispatch.js';
import { volunteerParts } from '../training/volunteer.js';
import { createNodeController } from '../node/host.js';
import { openStore } from '../store/index.js';
import { serveRuntime, type FromRuntime, type ToRuntime } from './runtime-rpc.js';

const parentPort = process.parentPort;
if (!parentPort) throw new Error('runtime-process must run as an Electron utility process (process.parentPort is missing)');

const version = process.env.COHORT_APP_VERSION ?? '0.0.0';
const config = resolveConfig({ env: process.env });
const log = createLogger(config);
const store = openStore(config.dataDir, { moveAside: config.moveAside, onInvalidMetric: (m) => log.warn(m) });
const controller = createNodeController({ store, log, version, parts: volunteerParts(config) });
log.info(`runtime up: data directory ${config.dataDir}`);

serveRuntime(
  {
    postMessage: (message: FromRuntime) => parentPort.postMessage(message),
    onMessage: (listener) => parentPort.on('message', (event) => listener(event.data as ToRuntime)),
  },
  controller,
  dispatch,
);

process.on('SIGTERM', () => {
  // let training finish its step and checkpoint before the store closes
  void controller.close().finally(() => {
    store.close();
    process.exit(0);
  });
});
