import { once } from 'node:events';
import type { Command } from 'commander';
import { raceSignal } from 'race-signal';
import { z } from 'zod';
import { ConfigError } from '../../config/load.js';
import { commaList } from '../../config/settings.js';
import { STATS_RECORD_INTERVAL_MS } from '../../swarm/constants.js';
import type { MetricsServer } from '../../node/metrics-server.js';
import type { SwarmInit, SwarmNode } from '../../swarm/index.js';
import { addSettingOptions, commandContext, describeCommandEnv } from '../context.js';
import { addFlags, flagRow, parseFlags, type FlagValues } from '../flag-table.js';
import { METRICS_FLAGS, metricsEndpoint, serveNodeMetrics } from '../metrics-endpoint.js';
import { REACHABILITY_WAIT_MS, SWARM_FLAGS, describeReachability, swarmFlagsInit, waitForReachability } from '../reachability.js';
import { stopOnSignal } from '../stop-signal.js';

const START_FLAGS = {
  runId: flagRow({ schema: z.string(), arg: '<id>', description: 'the run (swarm) to join: 1–64 of a-z 0-9 . _ -; taken from the join code when --initial-peers is one' }),
  hostMaddrs: flagRow({ schema: z.string(), arg: '<addrs>', description: 'comma-separated multiaddrs to listen on (default /ip4/0.0.0.0/tcp/0; none in client mode)' }),
  announceMaddrs: flagRow({ schema: z.string(), arg: '<addrs>', description: 'comma-separated multiaddrs to announce instead, e.g. a public IP with a forwarded port' }),
  ...SWARM_FLAGS,
  identity: flagRow({ schema: z.string(), arg: '<keyfile>', description: 'Ed25519 private key file for a fixed peer id (created if missing); default: the identity kept in the data directory' }),
  psk: flagRow({ schema: z.string(), arg: '<hex>', description: 'pre-shared key of a closed swarm: 64 hex characters' }),
  newPsk: flagRow({ schema: z.boolean(), description: 'start a new closed swarm with a fresh pre-shared key (it is put into the printed join code)' }),
  ...METRICS_FLAGS,
};
type StartOptions = FlagValues<typeof START_FLAGS>;

export function registerSwarm(program: Command): void {
  const swarm = program.command('swarm').description('run a swarm peer (DHT server, relay, bootstrap peer) and work with join codes');

  const start = swarm
    .command('start')
    .description('start a swarm peer: prints its full multiaddrs and a join code others can pass to --initial-peers (like hivemind’s DHT peer)');
  addFlags(start, START_FLAGS);
  addSettingOptions(start, ['initialPeers', 'moveAside']);
  describeCommandEnv(start);
  start.action(async () => {
    const { config, log } = commandContext(start);
    const opts = parseFlags(start, START_FLAGS);
    const init = await startInit(opts, config.initialPeers);
    const metrics = metricsEndpoint(opts);
    const [{ nodeStoreOptions, openStore }, { createSwarmNode, statsMetricPoints, swarmMetrics }] = await Promise.all([import('../../store/index.js'), import('../../swarm/index.js')]);
    const store = openStore(config.dataDir, nodeStoreOptions(config.moveAside, log));
    let node: SwarmNode | undefined;
    let metricsServer: MetricsServer | undefined;
    // before the node starts: a signal while it bootstraps (dead initial peers retried) stops it there
    const stop = stopOnSignal();
    try {
      node = await createSwarmNode({ ...init, log }, store);
      if (metrics) metricsServer = await serveNodeMetrics(metrics, swarmMetrics(node), log);
      const report = await raceSignal(node.ready, stop.signal);
      await waitForReachability(node, REACHABILITY_WAIT_MS, stop.signal);
      const addrs = node.multiaddrs();
      process.stdout.write(`Swarm "${node.runId}": peer ${node.peerId.toString()} (${describeReachability(node)})\n`);
      process.stdout.write(`Connected to ${report.connected.length} of ${report.connected.length + report.failed.length} initial peer(s)\n`);
      process.stdout.write(addrs.length > 0 ? `Visible multiaddrs:\n${addrs.map((a) => `  ${a}\n`).join('')}` : 'No visible multiaddrs yet (no relay reservation).\n');
      if (addrs.length > 0) process.stdout.write(`Join code (pass it to --initial-peers): ${node.joinCode()}\n`);
      const started = node; // the closure's: `node` is reassignable, so not narrowed in it
      const recordStats = (): void => store.metrics.record(statsMetricPoints(started.stats()));
      recordStats();
      const timer = setInterval(recordStats, STATS_RECORD_INTERVAL_MS);
      await once(stop.signal, 'abort');
      log.info('stopping');
      clearInterval(timer);
      recordStats();
    } catch (err) {
      if (!stop.signal.aborted || err !== stop.signal.reason) throw err;
      log.info('stopped while starting');
    } finally {
      await metricsServer?.close();
      await node?.stop();
      store.close();
      stop.release();
    }
  });

  const joinCode = swarm
    .command('join-code')
    .description('show what a join code holds (run id, bootstrap multiaddrs, whether the swarm is closed)')
    .requiredOption('--decode <code>', 'the join code to decode')
    .option('--json', 'print it as one JSON object');
  joinCode.action(async (opts: { decode: string; json?: boolean }) => {
    const [{ decodeJoinCode }, { JoinCodeError }] = await Promise.all([import('../../swarm/join-code.js'), import('../../swarm/errors.js')]);
    let info;
    try {
      info = decodeJoinCode(opts.decode);
    } catch (err) {
      if (err instanceof JoinCodeError) throw new ConfigError('--decode', err.message);
      throw err;
    }
    const view = { runId: info.runId, bootstrap: info.bootstrap.map(String), closed: info.psk !== undefined };
    if (opts.json) process.stdout.write(JSON.stringify(view) + '\n');
    else process.stdout.write(`run id: ${view.runId}\nclosed swarm (pre-shared key): ${view.closed ? 'yes' : 'no'}\nbootstrap peers:\n${view.bootstrap.map((a) => `  ${a}\n`).join('')}`);
  });
}

/** Validates the flags into a SwarmInit; every bad value becomes a ConfigError naming its flag (exit 2). */
async function startInit(opts: StartOptions, initialPeers: readonly string[]): Promise<SwarmInit> {
  const [{ decodeJoinCode, isJoinCode, soleJoinCode }, { JoinCodeError }, { generatePsk, parsePskHex }, { resolveSwarmInit }] = await Promise.all([
    import('../../swarm/join-code.js'),
    import('../../swarm/errors.js'),
    import('../../swarm/private-network.js'),
    import('../../swarm/config.js'),
  ]);
  if (opts.psk !== undefined && opts.newPsk) throw new ConfigError('--new-psk', 'cannot be combined with --psk');
  let psk: Uint8Array | undefined;
  try {
    psk = opts.newPsk ? generatePsk() : opts.psk === undefined ? undefined : parsePskHex(opts.psk);
  } catch (err) {
    throw new ConfigError('--psk', (err as Error).message);
  }
  const code = soleJoinCode(initialPeers);
  if (code !== undefined) {
    try {
      decodeJoinCode(code);
    } catch (err) {
      throw new ConfigError('--initial-peers', (err as Error).message);
    }
  } else if (initialPeers.some(isJoinCode)) {
    throw new ConfigError('--initial-peers', 'a join code must be given alone, not in a list of multiaddrs');
  }
  if (opts.runId === undefined && code === undefined) {
    throw new ConfigError('--run-id', 'required (unless --initial-peers is a join code); accepted: 1–64 characters of a-z, 0-9, ".", "_", "-"');
  }
  const init: SwarmInit = {
    ...(opts.runId !== undefined ? { runId: opts.runId } : {}),
    ...(opts.hostMaddrs !== undefined ? { listen: commaList(opts.hostMaddrs) } : {}),
    ...(opts.announceMaddrs !== undefined ? { announce: commaList(opts.announceMaddrs) } : {}),
    initialPeers: [...initialPeers],
    ...swarmFlagsInit(opts),
    ...(opts.identity !== undefined ? { identityFile: opts.identity } : {}),
    ...(psk !== undefined ? { psk } : {}),
  };
  try {
    resolveSwarmInit(init); // every address and the run id, checked before anything starts
  } catch (err) {
    const message = (err as Error).message;
    const flag = err instanceof JoinCodeError || message.startsWith('initial peer') ? '--initial-peers' : message.startsWith('address') ? '--host-maddrs/--announce-maddrs' : '--run-id';
    throw new ConfigError(flag, message);
  }
  return init;
}
