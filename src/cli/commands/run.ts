import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { Command } from 'commander';
import { raceSignal } from 'race-signal';
import type { CollaborativeOptions, ResolveRunSettings, RunData, RunParams, TrainingState } from '../../collab/index.js';
import { ConfigError } from '../../config/load.js';
import { commaList } from '../../config/settings.js';
import type { Logger } from '../../log/logger.js';
import type { MetricsServer } from '../../node/metrics-server.js';
import type { SwarmInit, SwarmNode } from '../../swarm/index.js';
import { trainerSettings } from '../../training/options.js';
import { OutputWriteError } from '../../util/output-path.js';
import { pick } from '../../util/pick.js';
import { addSettingOptions, commandContext, describeCommandEnv } from '../context.js';
import { addFlags, flagOf, outputFlag, parseFlags } from '../flag-table.js';
import { metricsEndpoint, serveNodeMetrics } from '../metrics-endpoint.js';
import { REACHABILITY_WAIT_MS, swarmFlagsInit, waitForReachability } from '../reachability.js';
import { checkFoundingDataFlags, checkRunSettings, RUN_FLAGS, RUN_SETTING_FLAGS, runSettingFlags, type RunFlags, type RunSettingFlags } from '../run-flags.js';
import { stopOnSignal } from '../stop-signal.js';
import { diskReserveBytes } from './data.js';

/** How long a stopping `cohort run` waits for its swarm node to stop. */
const NODE_STOP_MS = 10_000;

export function registerRun(program: Command): void {
  const cmd = program
    .command('run')
    .description('train collaboratively with a swarm (hivemind-style): prints this peer’s multiaddrs and join code, then trains until stopped (or --max-epochs); --coordinator runs a peer that computes nothing and records the swarm. [run-wide] flags must match across the swarm: the founder (no --join/--initial-peers) publishes them in a signed record, a joiner adopts the swarm’s (omit them; a contradicting one exits 2)');
  addFlags(cmd, RUN_FLAGS);
  addSettingOptions(cmd, ['initialPeers', 'moveAside']);
  describeCommandEnv(cmd);
  cmd.action(async () => {
    const { config: settings, log } = commandContext(cmd);
    const opts = parseFlags(cmd, RUN_FLAGS);
    const flags = runSettingFlags(cmd, opts);
    if (opts.averagingExpiration !== undefined && opts.averagingExpiration < opts.matchmakingTime) throw new ConfigError('--averaging-expiration', `${opts.averagingExpiration} is less than --matchmaking-time ${opts.matchmakingTime}`);
    // hivemind: delay_optimizer_step defaults to delay_grad_averaging
    const local = { delayGradAveraging: opts.delayGradAveraging, delayOptimizerStep: opts.delayOptimizerStep === true || opts.delayGradAveraging };
    if (opts.coordinator && (opts.clientMode || opts.reachability === 'private')) throw new ConfigError('--coordinator', 'a coordinator bootstraps others, so it cannot run in --client-mode (--reachability private)');
    if (opts.coordinator && opts.cacheQuota !== undefined) throw new ConfigError('--cache-quota', 'is a training peer’s: a coordinator serves the whole dataset it pins (omit it)');
    // a founder's flags are the run's parameters; a joiner's are checked against the swarm's once it has read them
    const founding = opts.join === undefined && settings.initialPeers.length === 0;
    if (founding) checkRunSettings(flags.settings, local, flags.explicit);
    checkFoundingDataFlags(founding, opts.dataSource, opts.tokenizer, opts.diskReserve);
    // written when training ends: a place it cannot go exits here, not after the training
    if (opts.out !== undefined) outputFlag('--out', opts.out, 'folder');
    const init = await swarmInit(opts, settings.initialPeers);
    const metrics = metricsEndpoint(opts);
    const resumeFrom = await resumeState(opts, founding);
    if (resumeFrom) log.info(`--resume-from ${opts.resumeFrom}: a state of epoch ${resumeFrom.epoch}`);
    const [{ Coordinator, collabOptionsOf, joinPeerIds, keptRunRecord, runSettingsOf, trainingMetrics }, { DiskFullError, isDiskFull, nodeStoreOptions, openStore }, { createSwarmNode, swarmMetrics }, { runSwarmPeer }, { foundingData }] = await Promise.all([
      import('../../collab/index.js'),
      import('../../store/index.js'),
      import('../../swarm/index.js'),
      import('../../training/swarm-peer.js'),
      import('../founding-data.js'),
    ]);

    const store = openStore(settings.dataDir, nodeStoreOptions(settings.moveAside, log));
    let node: SwarmNode | undefined;
    let metricsServer: MetricsServer | undefined;
    const stop = stopOnSignal();
    try {
      // a founder's data is ready before its join code is printed: joiners find the run's record at once
      const ownData = founding ? await foundingData({ store, dataDir: settings.dataDir, log, coordinator: opts.coordinator === true, source: opts.dataSource, tokenizer: opts.tokenizer, reserveBytes: diskReserveBytes(opts.diskReserve), seqLen: flags.settings.seqLen, signal: stop.signal }) : null;
      node = await createSwarmNode({ ...init, log }, store);
      if (metrics) metricsServer = await serveNodeMetrics(metrics, [...swarmMetrics(node), ...(opts.coordinator ? trainingMetrics(store) : [])], log);
      // a signal while it bootstraps stops it there: dead initial peers would hold it for their retries and the reachability wait
      const report = await raceSignal(node.ready, stop.signal);
      await waitForReachability(node, REACHABILITY_WAIT_MS, stop.signal);
      printAddresses(node, report.connected.length, report.connected.length + report.failed.length, opts.coordinator === true);
      const joinPeers = founding ? undefined : joinPeerIds(init.initialPeers ?? []);
      const record = await runRecord(node, joinPeers, flags, ownData, keptRunRecord(store, node.runId), log, stop.signal);
      const run = runSettingsOf(record);
      if (!founding) checkRunSettings(run, local);
      if (opts.coordinator) {
        const coordinator = new Coordinator({ ...pick(opts, ['refresh', 'checkpointEvery', 'keepCheckpoints']), node, store, dataDir: settings.dataDir, log, targetBatchSize: run.targetBatchSize, run: record });
        coordinator.start();
        // a signal while it started (its swarm, the run record) has fired already: once() would wait for another
        if (!stop.signal.aborted) await once(stop.signal, 'abort');
        log.info('stopping');
        await coordinator.stop();
        process.stdout.write(JSON.stringify({ role: 'coordinator', leaderboard: coordinator.leaderboard(), flagged: coordinator.flagged() }) + '\n');
      } else {
        const collab: CollaborativeOptions = {
          ...collabOptionsOf(run),
          ...local,
          // the flags named as the optimizer's options (rows over COLLABORATIVE_OPTION_FIELDS)
          ...pick(opts, ['matchmakingTime', 'averagingTimeout', 'averagingExpiration', 'targetGroupSize', 'displayName', 'backupEverySteps', 'maxBadMicroBatches']),
          maxRefresh: opts.refresh,
          trustedPeers: joinPeers ?? [],
          uploadLimit: opts.uploadLimit === undefined ? undefined : opts.uploadLimit * 1024,
          fault: opts.faultInflateClaims === undefined && opts.faultNonFiniteMicroBatches === undefined ? undefined : { inflateClaims: opts.faultInflateClaims, nonFiniteMicroBatches: opts.faultNonFiniteMicroBatches },
        };
        const { batchSize, precision, threads, maxEpochs, throttle, simulatedCompute, out, saveStateEvery: saveStateMinutes, faultPauseStateSave } = opts;
        const cacheQuotaBytes = opts.cacheQuota === undefined ? undefined : Math.floor(opts.cacheQuota * 2 ** 20);
        const summary = await runSwarmPeer({ node, store, dataDir: settings.dataDir, log, trainer: trainerSettings(run, { batchSize, precision }), threads, signal: stop.signal, maxEpochs, throttle, simulatedCompute, out, data: record.data, collab, run: record, saveStateMinutes, faultPauseStateSave, resumeFrom, cacheQuotaBytes });
        process.stdout.write(JSON.stringify({ role: 'peer', peer: node.peerId.toString(), ...summary }) + '\n');
      }
    } catch (err) {
      // a full disk is the volunteer's to fix: say so in one line instead of SQLite's bare "database or disk is full" and a stack
      // --out's own disk: its error names it
      if (isDiskFull(err) && !(err instanceof OutputWriteError)) throw new DiskFullError(settings.dataDir, `the disk holding ${settings.dataDir} is full (${(err as Error).message}): free space there and run again; the checkpoints saved before are kept (a save cut short is rolled back)`, { cause: err });
      // a signal before the run began (its data prepared, its record found) stops there: nothing to save yet
      if (!stop.signal.aborted || err !== stop.signal.reason) throw err;
      log.info('stopped while starting: nothing to save yet');
    } finally {
      await metricsServer?.close();
      // bounded: under load a libp2p stop can wait long on connections closing, and the state is saved already
      if (node) await Promise.race([node.stop(), delay(NODE_STOP_MS, undefined, { ref: false }).then(() => log.warn(`the swarm node did not stop within ${NODE_STOP_MS / 1000} s; exiting without waiting for it`))]);
      store.close();
      stop.release();
    }
  });
}

/** The run's record (see resolveRunParams; `kept`: the one this data directory keeps, and where the resolved one goes); an explicit flag that contradicts it exits 2 naming it. */
async function runRecord(node: SwarmNode, joinPeers: string[] | undefined, flags: RunSettingFlags, ownData: RunData | null, kept: Pick<ResolveRunSettings, 'stored' | 'keep'>, log: Logger, signal: AbortSignal): Promise<RunParams> {
  const { resolveRunParams, RunSettingsConflictError } = await import('../../collab/index.js');
  try {
    return await resolveRunParams(node, { own: flags.settings, ownData, joinPeers, explicit: flags.explicit, ...kept, log, signal });
  } catch (err) {
    if (err instanceof RunSettingsConflictError) throw new ConfigError(flagOf(RUN_SETTING_FLAGS, err.field), err.message);
    throw err;
  }
}

/** The state `--resume-from` names, read before anything starts; a bad directory or use exits 2 naming the flag. */
async function resumeState(opts: RunFlags, founding: boolean): Promise<TrainingState | undefined> {
  if (opts.resumeFrom === undefined) return undefined;
  if (opts.coordinator || !founding) throw new ConfigError('--resume-from', 'founds a run from a state: give it to a training peer without --coordinator, --join or --initial-peers');
  const { loadStateDir } = await import('../../collab/index.js');
  try {
    return loadStateDir(opts.resumeFrom);
  } catch (err) {
    throw new ConfigError('--resume-from', (err as Error).message);
  }
}

/** The flags as a SwarmInit; a bad value exits 2 naming its flag. */
async function swarmInit(opts: RunFlags, initialPeers: readonly string[]): Promise<SwarmInit> {
  const [{ isJoinCode }, { resolveSwarmInit }] = await Promise.all([import('../../swarm/join-code.js'), import('../../swarm/config.js')]);
  if (opts.join !== undefined && initialPeers.length > 0) throw new ConfigError('--join', 'give either --join or --initial-peers, not both');
  if (opts.join !== undefined && !isJoinCode(opts.join)) throw new ConfigError('--join', `"${opts.join.slice(0, 40)}" is not a join code; accepted: the cohort:… code a running peer prints`);
  const init: SwarmInit = {
    ...(opts.join !== undefined ? { initialPeers: opts.join } : { runId: opts.runId, initialPeers: [...initialPeers] }),
    ...(opts.listen !== undefined ? { listen: commaList(opts.listen) } : {}),
    ...swarmFlagsInit(opts),
  };
  try {
    resolveSwarmInit(init);
  } catch (err) {
    const message = (err as Error).message;
    throw new ConfigError(opts.join !== undefined ? '--join' : message.startsWith('initial peer') ? '--initial-peers' : message.startsWith('address') ? '--listen' : '--run-id', message);
  }
  return init;
}

/** As hivemind's DHT peer: the full multiaddrs and what others pass to join. */
function printAddresses(node: SwarmNode, connected: number, tried: number, coordinator: boolean): void {
  const addrs = node.multiaddrs();
  process.stdout.write(`Swarm "${node.runId}": ${coordinator ? 'coordinator' : 'training peer'} ${node.peerId.toString()}${node.reachability === 'public' ? '' : node.reachability === 'private' ? ' (client mode)' : ' (reachability unknown: AutoNAT is probing)'}; connected to ${connected} of ${tried} initial peer(s)\n`);
  for (const a of addrs) process.stdout.write(`Visible multiaddr: ${a}\n`);
  if (addrs.length > 0) process.stdout.write(`To join this swarm, run: cohort run --join ${node.joinCode()}\n`);
}
