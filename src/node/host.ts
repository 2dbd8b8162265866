import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { MakeNodeParts } from '../training/service.js';
import { NodeController } from './controller.js';
import { LogRing } from './log-ring.js';
import { teeLogger } from './log-tee.js';

/**
 * What both hosts run (the headless CLI and the desktop app's utility process): one log for stderr
 * and the dashboard, the node's parts (training, coordinator, swarm presence), and the controller over them.
 */
export function createNodeController(init: { store: Store; log: Logger; version: string; licence?: string; logDir?: string; parts?: MakeNodeParts }): NodeController {
  const logs = new LogRing();
  const log = teeLogger(init.log, logs);
  const { parts, ...rest } = init;
  return new NodeController({ ...rest, log, logs, ...parts?.({ log, store: init.store }) });
}
