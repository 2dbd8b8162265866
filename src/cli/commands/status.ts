import { setTimeout as delay } from 'node:timers/promises';
import type { Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../../config/load.js';
import { commandContext } from '../context.js';
import { addFlags, flagRow, parseFlags } from '../flag-table.js';

const STATUS_FLAGS = {
  targetBatchSize: flagRow({ schema: z.number().int().min(1), description: 'the run’s target batch size, for the ETA (default: the swarm’s published one, else 4096)' }),
  top: flagRow({ schema: z.number().int().min(1).max(20), default: 5, description: 'contributors to list' }),
  wait: flagRow({ schema: z.number().finite().positive(), default: 10, arg: '<s>', description: 'seconds to wait for the swarm to answer (connecting and reading its records together)' }),
  json: flagRow({ schema: z.boolean(), description: 'print one JSON object' }),
};

/**
 * `cohort status --join CODE`: joins the swarm briefly as a DHT client (it stores nothing and
 * accepts no connections), reads the peers' progress records and a coordinator's leaderboard.
 */
export function registerStatus(program: Command): void {
  const cmd = program
    .command('status')
    .description('join a swarm briefly as a client and print its epoch, peers, samples/s, ETA, run parameters, data (dataset id, tokenizer sha256, peers holding each shard) and top contributors')
    .requiredOption('--join <code>', 'join code of the swarm (cohort:…)');
  addFlags(cmd, STATUS_FLAGS);
  cmd.action(async ({ join }: { join: string }) => {
    const { log } = commandContext(cmd);
    const [{ decodeJoinCode, isJoinCode }, { JoinCodeError }] = await Promise.all([import('../../swarm/join-code.js'), import('../../swarm/errors.js')]);
    if (!isJoinCode(join)) throw new ConfigError('--join', `"${join.slice(0, 40)}" is not a join code; accepted: the cohort:… code a running peer prints`);
    try {
      decodeJoinCode(join);
    } catch (err) {
      if (err instanceof JoinCodeError) throw new ConfigError('--join', err.message);
      throw err;
    }
    const { targetBatchSize: givenTarget, top, wait, json } = parseFlags(cmd, STATUS_FLAGS);
    const [{ currentProgress, globalProgress, latestLeaderboard, PROGRESS_KEY, progressRecords, readyForStep, describeRunData, describeRunSettings, describeUnreadableRun, joinPeerIds, readRunParams, runSettingsOf, servedStateEpoch }, { holdersPerShard }, { createSwarmNode, SwarmUnreachableError }] = await Promise.all([
      import('../../collab/index.js'),
      import('../../shards/index.js'),
      import('../../swarm/index.js'),
    ]);
    const node = await createSwarmNode({ initialPeers: join, clientMode: true, log });
    try {
      // one deadline for connecting and reading: a peer that accepts and never answers keeps the bootstrap's 5 attempts going for half a minute
      const deadline = Date.now() + wait * 1000;
      const report = await Promise.race([node.ready, delay(wait * 1000, undefined, { ref: false })]);
      if (report === undefined || report.connected.length === 0) throw new SwarmUnreachableError(`could not reach any peer of the join code's swarm "${node.runId}" within ${wait} s (--wait; the log above says what each address answered): check that the peer which printed the code is still running`);
      // the DHT may need a moment after bootstrap: retry until records answer or the wait is over
      // the run's published parameters give the ETA's target unless one is given
      const joinPeers = joinPeerIds(join);
      // run records of another release: no parameters, and the reason why
      const unreadable = new Set<string>();
      const run = await readRunParams(node, { joinPeers, waitMs: deadline - Date.now(), log, unreadable });
      const runUnreadable = run === undefined && unreadable.size > 0 ? describeUnreadableRun(unreadable) : null;
      const targetBatchSize = givenTarget ?? run?.params.targetBatchSize ?? 4096;
      const progress = progressRecords(node);
      let entries = await progress.get(PROGRESS_KEY);
      while (entries.size === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        entries = await progress.get(PROGRESS_KEY);
      }
      const now = Date.now();
      const reports = currentProgress(entries, now).map((e) => ({ peerId: e.owner, ...e.value }));
      const g = globalProgress(reports, now, { targetBatchSize });
      // the run's epoch also when nobody trains: a restarted coordinator serving its last checkpoint (a joiner loads it)
      const served = await servedStateEpoch(node, joinPeers);
      const epoch = Math.max(g.epoch, served ?? 0);
      const board = await latestLeaderboard(node, joinPeers);
      const pinned = run?.params.data ?? null;
      const holders = pinned === null ? [] : await holdersPerShard(node, pinned.datasetId);
      // without a coordinator, only the peers' own (unverified) totals exist
      const contributors = board
        ? board.rows.slice(0, top).map((r) => ({ name: r.name, samples: r.samples, share: r.share, verified: true, ...(r.computeHours === undefined ? {} : { computeHours: r.computeHours }) }))
        : reports
            .map((r) => ({ name: r.displayName ?? r.peerId, samples: r.totalSamples }))
            .sort((a, b) => b.samples - a.samples)
            .slice(0, top)
            .map((r, _, all) => ({ ...r, share: r.samples / Math.max(1, all.reduce((s, x) => s + x.samples, 0)), verified: false }));
      const view = { runId: node.runId, epoch, servedStateEpoch: served ?? null, peers: g.peers, samplesPerSecond: g.samplesPerSecond, samplesAccumulated: g.samples, targetBatchSize, readyToStep: readyForStep(g), eta: Number.isFinite(g.eta) ? g.eta : null, runParams: run ? { ...runSettingsOf(run.params), created: run.params.created, publishedBy: run.owner } : null, runParamsUnreadable: runUnreadable, data: pinned === null ? null : { ...pinned, holdersPerShard: holders }, contributors };
      if (json) process.stdout.write(JSON.stringify(view) + '\n');
      else {
        process.stdout.write(`swarm "${view.runId}": epoch ${view.epoch}, ${view.peers} training peer(s), ${view.samplesPerSecond.toFixed(1)} samples/s\n`);
        process.stdout.write(`newest state served: ${served === undefined ? 'none (a joiner starts from its own checkpoint or new weights)' : `epoch ${served} (what a joining peer loads)`}\n`);
        // the peers' throughput says the target is reached, though their last reports may hold fewer: they are averaging (or about to)
        const next = view.readyToStep ? `ready to step to epoch ${g.epoch + 1} (at the peers' samples/s the target is reached: they average, then step)` : `ETA ${view.eta === null ? 'unknown' : `${view.eta.toFixed(1)} s`}`;
        process.stdout.write(`accumulated ${view.samplesAccumulated} of ${targetBatchSize} samples; ${next}\n`);
        process.stdout.write(run ? `run parameters (published by ${run.owner}): ${describeRunSettings(runSettingsOf(run.params))}\n` : `run parameters: ${runUnreadable === null ? 'none published (peers use their own flags)' : `none readable: ${runUnreadable}`}\n`);
        if (run) process.stdout.write(`data: ${describeRunData(pinned)}${pinned === null ? '' : `; ${holders.length === 0 ? 'no peer advertises its shards' : `peers holding each of its ${holders.length} shard(s): ${holders.join(' ')}`}`}\n`);
        process.stdout.write(`top contributors${board ? ' (credited by a coordinator)' : ' (claimed by the peers themselves: no coordinator leaderboard found)'}:${contributors.length === 0 ? ' none yet (no samples recorded)' : ''}\n`);
        for (const [i, c] of contributors.entries()) {
          const hours = 'computeHours' in c && typeof c.computeHours === 'number' ? `, ${c.computeHours.toFixed(2)} compute-hours` : '';
          process.stdout.write(`  ${i + 1}. ${c.name}: ${Math.round(c.samples)} samples (${(c.share * 100).toFixed(1)}%${hours})\n`);
        }
      }
    } finally {
      await node.stop();
    }
  });
}
