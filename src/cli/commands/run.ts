import type { Command } from 'commander';
import { AGGREGATIONS, COMPRESSIONS } from '../../averaging/index.js';
import { collabOptionsOf, Coordinator, DEFAULT_RUN_SETTINGS, joinPeerIds, resolveRunSettings, RunSettingsConflictError, resolveCollaborativeOptions, type CollaborativeOptions, type ResolvedRun, type RunData, type RunSettings } from '../../collab/index.js';
import { ConfigError } from '../../config/load.js';
import { PRESET_NAMES } from '../../engine/index.js';
import { ShardServer } from '../../shards/index.js';
import { openStore } from '../../store/index.js';
import { resolveSwarmInit } from '../../swarm/config.js';
import { createSwarmNode, isJoinCode, type SwarmInit, type SwarmNode } from '../../swarm/index.js';
import { REACHABILITY_MODES } from '../../swarm/reachability/reachability.js';
import { DEFAULT_LOCAL_TRAINER, trainerSettings } from '../../training/options.js';
import { runSwarmPeer } from '../../training/swarm-peer.js';
import { addSettingOptions, commandContext, describeCommandEnv } from '../context.js';
import { intFlag, positiveFloatFlag } from '../flags.js';
import { checkRunSettings, RUN_SETTING_FLAGS, runSettingFlags } from '../run-settings.js';
import { PRECISION_HELP, precisionFlag } from './model.js';
import { REACHABILITY_WAIT_MS, reachabilityInit, waitForReachability } from '../reachability.js';
import { checkFoundingDataFlags, foundingData } from '../founding-data.js';

/** The optimizer's own defaults, shown in --help. */
const OPTIMIZER_DEFAULTS = resolveCollaborativeOptions({ ...collabOptionsOf(DEFAULT_RUN_SETTINGS) });
const RUN = DEFAULT_RUN_SETTINGS;

interface RunOptions {
  join?: string;
  runId?: string;
  listen?: string;
  clientMode?: boolean;
  reachability?: string;
  mdns?: boolean;
  coordinator?: boolean;
  preset?: string;
  targetBatchSize?: string;
  batchSize?: string;
  seqLen?: string;
  maxEpochs?: string;
  matchmakingTime?: string;
  averagingTimeout?: string;
  averagingExpiration?: string;
  gradCompression?: string;
  averageStateEvery?: string;
  stateAveragingCompression?: string;
  averageOptStatistics?: boolean;
  useLocalUpdates?: boolean;
  batchSizeLead?: string;
  aggregation?: string;
  delayOptimizerStep?: boolean;
  delayGradAveraging?: boolean;
  lr?: string;
  warmupSteps?: string;
  totalSteps?: string;
  seed?: string;
  threads?: string;
  precision?: string;
  displayName?: string;
  uploadLimit?: string;
  checkpointEvery?: string;
  keepCheckpoints?: string;
  refresh?: string;
  targetGroupSize?: string;
  out?: string;
  throttle?: string;
  faultInflateClaims?: string;
  dataSource?: string;
  tokenizer?: string;
}

export function registerRun(program: Command): void {
  const cmd = program
    .command('run')
    .description('train collaboratively with a swarm (hivemind-style): prints this peer’s multiaddrs and join code, then trains until stopped (or --max-epochs); --coordinator runs a peer that computes nothing and records the swarm. [run-wide] flags must match across the swarm: the founder (no --join/--initial-peers) publishes them in a signed record, a joiner adopts the swarm’s (omit them; a contradicting one exits 2)')
    .option('--join <code>', 'join code of a running swarm (cohort:…)')
    .option('--run-id <id>', 'the run to start or join (taken from --join when given); 1–64 of a-z 0-9 . _ -', 'cohort-albert')
    .option('--listen <addrs>', 'comma-separated multiaddrs to listen on (default /ip4/0.0.0.0/tcp/0)')
    .option('--reachability <mode>', `serve the DHT or not; accepted: ${REACHABILITY_MODES.join(', ')} (default auto: a DHT client until AutoNAT dial-backs confirm this peer is reachable)`)
    .option('--client-mode', 'behind NAT: accept no inbound connections, only send during averaging (= --reachability private)')
    .option('--mdns', 'find peers of the same run on the local network with mDNS')
    .option('--coordinator', 'compute nothing: bootstrap others, record every peer’s progress and metrics, credit contributions, checkpoint the model')
    .option('--preset <name>', `model size; accepted: ${PRESET_NAMES.join(', ')} [run-wide]`, RUN.preset)
    .option('--target-batch-size <n>', 'samples the swarm gathers per optimizer step (target_batch_size) [run-wide]', String(RUN.targetBatchSize))
    .option('--batch-size <n>', 'this peer’s micro-batch size', String(DEFAULT_LOCAL_TRAINER.batchSize))
    .option('--seq-len <n>', `tokens per sequence (default ${RUN.seqLen}, at most the preset’s positions) [run-wide]`)
    .option('--max-epochs <n>', 'stop once the swarm reaches this epoch')
    .option('--matchmaking-time <s>', 'seconds to form an averaging group (matchmaking_time)', String(OPTIMIZER_DEFAULTS.matchmakingTime))
    .option('--averaging-timeout <s>', 'seconds allowed for one gradient all-reduce (averaging_timeout)', String(OPTIMIZER_DEFAULTS.averagingTimeout))
    .option('--averaging-expiration <s>', 'lifetime of a group declaration in seconds (averaging_expiration; default max(matchmaking time, 15))')
    .option('--target-group-size <n>', 'peers per averaging group; the group closes early once this many joined (target_group_size)', String(OPTIMIZER_DEFAULTS.targetGroupSize))
    .option('--grad-compression <kind>', `gradient wire compression (grad_compression); accepted: ${COMPRESSIONS.join(', ')} [run-wide]`, RUN.gradCompression)
    .option('--average-state-every <n>', 'all-reduce the parameters every N epochs (average_state_every; default 1 with --use-local-updates, else never) [run-wide]')
    .option('--state-averaging-compression <kind>', `wire compression of state averaging (state_averaging_compression); accepted: ${COMPRESSIONS.join(', ')} [run-wide]`, RUN.stateAveragingCompression)
    .option('--average-opt-statistics', 'state averaging also averages the LAMB moments (average_opt_statistics) [run-wide]')
    .option('--use-local-updates', 'step on every micro-batch without averaging gradients; parameters are averaged every --average-state-every epochs (use_local_updates) [run-wide]')
    .option('--aggregation <kind>', `how reducers combine the members' gradients; accepted: ${AGGREGATIONS.join(', ')} (centered-clip and trimmed-mean bound what one hostile member can do; mean is hivemind's) [run-wide]`, RUN.aggregation)
    .option('--batch-size-lead <n>', 'begin averaging when the swarm is this many samples short of the target batch (batch_size_lead) [run-wide]', String(RUN.batchSizeLead))
    .option('--delay-optimizer-step', 'take the optimizer step during the next micro-batch, which is computed on the parameters before it (delay_optimizer_step; implied by --delay-grad-averaging)')
    .option('--delay-grad-averaging', 'average gradients in the background while computing the next micro-batches; the step lands when the round ends (delay_grad_averaging; implies --delay-optimizer-step)')
    .option('--lr <x>', 'peak LAMB learning rate [run-wide]', String(RUN.peakLr))
    .option('--warmup-steps <n>', 'warmup in swarm epochs [run-wide]', String(RUN.warmupSteps))
    .option('--total-steps <n>', 'swarm epochs at which the learning rate has decayed to 0 [run-wide]', String(RUN.totalSteps))
    .option('--seed <n>', 'seed of the initial weights (the same on every peer) [run-wide]', String(RUN.seed))
    .option('--threads <n>', 'onnxruntime threads (default: one per core)')
    .option('--precision <name>', `${PRECISION_HELP}; a micro-batch whose fp16 gradients overflow contributes nothing`)
    .option('--display-name <name>', 'name shown on the contribution leaderboard')
    .option('--upload-limit <KiB/s>', 'cap on this peer’s averaging upload in KiB/s (also the bandwidth it declares); default: no cap')
    .option('--checkpoint-every <n>', 'coordinator: checkpoint every N epochs (0: never)', '10')
    .option('--keep-checkpoints <n>', 'coordinator: checkpoints kept', '3')
    .option('--refresh <s>', 'seconds between progress looks: coordinator polls; peers’ longest wait', '2')
    .option('--out <dir>', 'save the final model here (config.json + model.safetensors) when training ends')
    .option('--throttle <factor>', 'testing: run at 1/factor of this machine’s speed')
    .option('--fault-inflate-claims <factor>', 'testing only: claim factor× the samples processed (contribution checks must catch it)')
    // pinning flags
    .option('--data-source <path|url>', 'founder: prepare this corpus (FILE, DIR, URL; .zip/.tar/.tar.gz/.gz read as they ship) and pin it in the run record; joiners fetch it from the swarm')
    .option('--tokenizer <file>', 'founder: the Hugging Face tokenizer.json of --data-source (default: a WordPiece tokenizer trained on it)')
    .option('--adam-beta1 <x>', `LAMB β₁ (adam_beta1; default ${RUN.adamBeta1}) [run-wide]`)
    .option('--adam-beta2 <x>', `LAMB β₂ (adam_beta2; default ${RUN.adamBeta2}) [run-wide]`)
    .option('--adam-epsilon <x>', `LAMB ε (adam_epsilon; default ${RUN.adamEpsilon}) [run-wide]`)
    .option('--weight-decay <x>', `LAMB weight decay, 0 to 1 (weight_decay; default ${RUN.weightDecay}) [run-wide]`)
    .option('--clamp-value <x>', `LAMB's clamp on each tensor's weight norm (clamp_value; default ${RUN.clampValue}) [run-wide]`)
    .option('--max-grad-norm <x>', `global gradient-norm clip before each step (max_grad_norm; default ${RUN.maxGradNorm}) [run-wide]`);
  addSettingOptions(cmd, ['initialPeers']);
  describeCommandEnv(cmd);
  cmd.action(async (opts: RunOptions) => {
    const { config: settings, log } = commandContext(cmd);
    const flags = runSettingFlags(cmd, opts as Record<string, string | boolean | undefined>);
    const batchSize = intFlag('--batch-size', opts.batchSize, 1, 4096)!;
    const maxEpochs = intFlag('--max-epochs', opts.maxEpochs, 1);
    const matchmakingTime = positiveFloatFlag('--matchmaking-time', opts.matchmakingTime)!;
    const averagingTimeout = positiveFloatFlag('--averaging-timeout', opts.averagingTimeout)!;
    const averagingExpiration = positiveFloatFlag('--averaging-expiration', opts.averagingExpiration) ?? Math.max(matchmakingTime, 15);
    if (averagingExpiration < matchmakingTime) throw new ConfigError('--averaging-expiration', `${averagingExpiration} is less than --matchmaking-time ${matchmakingTime}`);
    const uploadLimitKiB = intFlag('--upload-limit', opts.uploadLimit, 1, 10_485_760);
    // hivemind: delay_optimizer_step defaults to delay_grad_averaging
    const local = { delayGradAveraging: opts.delayGradAveraging === true, delayOptimizerStep: opts.delayOptimizerStep === true || opts.delayGradAveraging === true };
    const threads = intFlag('--threads', opts.threads, 1, 1024);
    const precision = precisionFlag(opts.precision);
    const checkpointEvery = intFlag('--checkpoint-every', opts.checkpointEvery, 0)!;
    const keepCheckpoints = intFlag('--keep-checkpoints', opts.keepCheckpoints, 1, 1000)!;
    const targetGroupSize = intFlag('--target-group-size', opts.targetGroupSize, 1, 256)!;
    const refresh = positiveFloatFlag('--refresh', opts.refresh)!;
    const throttle = positiveFloatFlag('--throttle', opts.throttle);
    const inflateClaims = positiveFloatFlag('--fault-inflate-claims', opts.faultInflateClaims);
    if (opts.displayName !== undefined && (opts.displayName.length === 0 || opts.displayName.length > 64)) throw new ConfigError('--display-name', 'must be 1–64 characters');
    if (opts.coordinator && (opts.clientMode || opts.reachability === 'private')) throw new ConfigError('--coordinator', 'a coordinator bootstraps others, so it cannot run in --client-mode (--reachability private)');
    // a founder's flags are the run's parameters; a joiner's are checked against the swarm's once it has read them
    const founding = opts.join === undefined && settings.initialPeers.length === 0;
    if (founding) checkRunSettings(flags.settings, local);
    checkFoundingDataFlags(founding, opts.dataSource, opts.tokenizer);
    const init = swarmInit(opts, settings.initialPeers);

    const store = openStore(settings.dataDir, { moveAside: settings.moveAside, onInvalidMetric: (m) => log.warn(m) });
    let node: SwarmNode | undefined;
    const stop = new AbortController();
    const onSignal = (): void => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      // a founder's data is ready before its join code is printed: joiners find the run's record at once
      const ownData = founding ? await foundingData({ store, dataDir: settings.dataDir, log, coordinator: opts.coordinator === true, source: opts.dataSource, tokenizer: opts.tokenizer, seqLen: flags.settings.seqLen }) : null;
      node = await createSwarmNode({ ...init, log }, store);
      const report = await node.ready;
      await waitForReachability(node, REACHABILITY_WAIT_MS);
      printAddresses(node, report.connected.length, report.connected.length + report.failed.length, opts.coordinator === true);
      const { settings: run, data } = await runSettings(node, founding ? undefined : joinPeerIds(init.initialPeers ?? []), flags, ownData, log, stop.signal);
      if (!founding) checkRunSettings(run, local);
      if (opts.coordinator) {
        const coordinator = new Coordinator({ node, store, dataDir: settings.dataDir, log, targetBatchSize: run.targetBatchSize, refresh, checkpointEvery, keepCheckpoints });
        coordinator.start();
        // the founder is the first holder of the run's data
        const shards = data === null ? undefined : new ShardServer(node, store, log);
        await shards?.start();
        await new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve(), { once: true }));
        await shards?.stop();
        await coordinator.stop();
        process.stdout.write(JSON.stringify({ role: 'coordinator', leaderboard: coordinator.leaderboard(), flagged: coordinator.flagged() }) + '\n');
      } else {
        const collab: CollaborativeOptions = {
          ...collabOptionsOf(run),
          matchmakingTime,
          averagingTimeout,
          averagingExpiration,
          targetGroupSize,
          delayGradAveraging: local.delayGradAveraging,
          delayOptimizerStep: local.delayOptimizerStep,
          maxRefresh: refresh,
          displayName: opts.displayName,
          uploadLimit: uploadLimitKiB === undefined ? undefined : uploadLimitKiB * 1024,
          fault: inflateClaims === undefined ? undefined : { inflateClaims },
        };
        const summary = await runSwarmPeer({ node, store, dataDir: settings.dataDir, log, trainer: trainerSettings(run, { batchSize, precision }), threads, signal: stop.signal, maxEpochs, throttle, out: opts.out, data, collab });
        process.stdout.write(JSON.stringify({ role: 'peer', peer: node.peerId.toString(), ...summary }) + '\n');
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await node?.stop();
      store.close();
    }
  });
}

/** The run's settings and data (see resolveRunSettings); an explicit flag that contradicts the swarm's exits 2 naming it. */
async function runSettings(node: SwarmNode, joinPeers: string[] | undefined, flags: ReturnType<typeof runSettingFlags>, ownData: RunData | null, log: Parameters<typeof resolveRunSettings>[1]['log'], signal: AbortSignal): Promise<ResolvedRun> {
  try {
    return await resolveRunSettings(node, { own: flags.settings, ownData, joinPeers, explicit: flags.explicit, log, signal });
  } catch (err) {
    if (err instanceof RunSettingsConflictError) throw new ConfigError(RUN_SETTING_FLAGS[err.field as keyof RunSettings].flag, err.message);
    throw err;
  }
}

/** The flags as a SwarmInit; a bad value exits 2 naming its flag. */
function swarmInit(opts: RunOptions, initialPeers: readonly string[]): SwarmInit {
  if (opts.join !== undefined && initialPeers.length > 0) throw new ConfigError('--join', 'give either --join or --initial-peers, not both');
  if (opts.join !== undefined && !isJoinCode(opts.join)) throw new ConfigError('--join', `"${opts.join.slice(0, 40)}" is not a join code; accepted: the cohort:… code a running peer prints`);
  const list = (text: string | undefined): string[] | undefined => text?.split(',').map((s) => s.trim()).filter(Boolean);
  const init: SwarmInit = {
    ...(opts.join !== undefined ? { initialPeers: opts.join } : { runId: opts.runId, initialPeers: [...initialPeers] }),
    ...(opts.listen !== undefined ? { listen: list(opts.listen) } : {}),
    ...reachabilityInit(opts.reachability, opts.clientMode),
    ...(opts.mdns ? { mdns: true } : {}),
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
