// The node runtime inside Electron's utility process, off the UI thread: opens the store, runs the
// controller and answers main over the parent port (see runtime-rpc.ts). Its log goes to stderr and
// to a rotating file in the data directory ("Open log folder").
import { resolveConfig } from '../config/load.js';
import { logDirOf, openLogFile, teeStream } from '../log/log-file.js';
import { createLogger } from '../log/logger.js';
import { dispatch } from '../node/api-dispatch.js';
import { PACKAGE_INFO } from '../node/package-info.js';
import { outliveTerminal } from '../util/terminal.js';
import { volunteerParts } from '../training/volunteer.js';
import { createNodeController } from '../node/host.js';
import { nodeStoreOptions, openStore } from '../store/index.js';
import { openOrReport, serveRuntime, type FromRuntime, type ToRuntime } from './runtime-rpc.js';

const parentPort = process.parentPort;
if (!parentPort) throw new Error('runtime-process must run as an Electron utility process (process.parentPort is missing)');

outliveTerminal();
const config = resolveConfig({ env: process.env });
const logDir = logDirOf(config.dataDir);
const log = createLogger(config, teeStream(process.stderr, await openLogFile(logDir)));
const store = await openOrReport(
  () => openStore(config.dataDir, nodeStoreOptions(config.moveAside, log)),
  (message) => parentPort.postMessage(message),
  log,
);
const controller = createNodeController({ store, log, version: PACKAGE_INFO.version, licence: PACKAGE_INFO.license, logDir, parts: volunteerParts(config) });
log.info(`runtime up: data directory ${config.dataDir}, log files in ${logDir}`);

serveRuntime(
  {
    postMessage: (message: FromRuntime) => parentPort.postMessage(message),
    onMessage: (listener) => parentPort.on('message', (event) => listener(event.data as ToRuntime)),
  },
  controller,
  dispatch,
);

// SIGHUP too: the terminal the app was started from closed (its log goes there, see outliveTerminal)
let closing = false;
for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (closing) return;
    closing = true;
    // let training finish its step and checkpoint before the store closes
    void controller.close().finally(() => {
      store.close();
      process.exit(0);
    });
  });
}
