/**
 * Which swarm Start joins: the volunteer's join code, else the node's default run (the build's
 * assets/default-swarm.json, or the initial peers given by `--initial-peers`, COHORT_INITIAL_PEERS or
 * the config file, as Petals ships PUBLIC_INITIAL_PEERS), else none (training alone).
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { SwarmDescription } from '../shared/api.js';
import { decodeJoinCode, soleJoinCode, resolveSwarmInit } from '../swarm/index.js';

/** Run id of a swarm named by multiaddrs alone (and of a swarm this node founds). */
export const DEFAULT_RUN_ID = 'cohort-albert';

/** The peers to bootstrap from: one join code, or multiaddrs with /p2p/<id> of the run `runId`. */
export interface SwarmTarget {
  readonly initialPeers: readonly string[];
  /** The run of multiaddr peers. @default DEFAULT_RUN_ID (a join code carries its own) */
  readonly runId?: string;
}

/** Where a build ships its default run (two folders up from src/training/ and from out/main/ alike). */
export const DEFAULT_SWARM_FILE = fileURLToPath(new URL('../../assets/default-swarm.json', import.meta.url));

const DefaultSwarmFileSchema = z.strictObject({
  initialPeers: z.array(z.string().trim().min(1)).min(1, 'lists no initial peer'),
  runId: z.string().trim().min(1).optional(),
});

/** The swarm init fields of a target (a join code carries its run id, so none is added to it). */
export function swarmInitOf(target: SwarmTarget): { initialPeers: readonly string[]; runId?: string } {
  const code = soleJoinCode(target.initialPeers) !== undefined;
  return { initialPeers: target.initialPeers, ...(code ? (target.runId ? { runId: target.runId } : {}) : { runId: target.runId ?? DEFAULT_RUN_ID }) };
}

/** What a target names, decoded fully (run id, addresses, checksum); throws a RangeError or JoinCodeError saying what is wrong. */
export function describeSwarm(target: SwarmTarget): SwarmDescription {
  const init = resolveSwarmInit(swarmInitOf(target));
  return { runId: init.runId, peers: init.initialPeers.map((a) => a.toString()), closed: init.psk !== undefined };
}

/** What a join code (`cohort:…` only, never bare multiaddrs) names; throws a JoinCodeError saying what is wrong. */
export function describeJoinCode(code: string): SwarmDescription {
  const info = decodeJoinCode(code);
  return { runId: info.runId, peers: info.bootstrap.map((a) => a.toString()), closed: info.psk !== undefined };
}

/** The build's default run, or undefined when the file is absent; a malformed file is an error naming it. */
export function readDefaultSwarm(file = DEFAULT_SWARM_FILE): SwarmTarget | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the default run ${file}: ${(err as Error).message}`, { cause: err });
  }
  let target: SwarmTarget;
  try {
    target = DefaultSwarmFileSchema.parse(JSON.parse(text));
    describeSwarm(target);
  } catch (err) {
    const why = err instanceof z.ZodError ? err.issues.map((i) => `${i.path.join('.') || 'file'}: ${i.message}`).join('; ') : (err as Error).message;
    throw new Error(`the default run ${file} is invalid: ${why} (expected {"initialPeers": ["cohort:…" or multiaddrs], "runId"?: "…"})`, { cause: err });
  }
  return target;
}

/** The default run of a node: its configured initial peers win over the build's file. */
export function defaultSwarmTarget(initialPeers: readonly string[], file = DEFAULT_SWARM_FILE): SwarmTarget | undefined {
  return initialPeers.length > 0 ? { initialPeers } : readDefaultSwarm(file);
}
