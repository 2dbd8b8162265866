import { once } from 'node:events';
import type { Command } from 'commander';
import { addSettingOptions, commandContext } from '../context.js';
import { stopOnSignal } from '../stop-signal.js';

export function registerStart(program: Command): void {
  const cmd = program.command('start').description('start the headless node with the default settings and serve the dashboard on loopback (what `npm start` runs without Electron)');
  addSettingOptions(cmd, ['dashboardHost', 'dashboardPort', 'dashboardToken', 'initialPeers', 'training', 'moveAside']);
  cmd.action(async () => {
    const { config, log } = commandContext(cmd);
    const [{ volunteerParts }, { startHeadlessNode }] = await Promise.all([import('../../training/volunteer.js'), import('../../node/headless.js')]);
    const node = await startHeadlessNode(config, log, volunteerParts(config));
    process.stdout.write(`Cohort dashboard: ${node.url}${config.dashboardToken ? ' (open it with ?token=<your dashboard token>)' : ''}\n`);
    const stop = stopOnSignal();
    await once(stop.signal, 'abort');
    log.info('stopping');
    await node.stop();
    stop.release();
  });
}
