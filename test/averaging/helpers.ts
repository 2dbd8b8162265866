import type { TestContext } from 'node:test';
import { createAverager, type Averager, type AveragerInit } from '../../src/averaging/index.js';
import type { SwarmNode } from '../../src/swarm/index.js';

/**
 * Small timeouts so failing paths finish in seconds. Groups that fill up close at once, so the
 * matchmaking time only bounds how long a starved machine may take to form one.
 */
export const FAST: Omit<AveragerInit, 'prefix'> = {
  matchmakingTimeMs: 8000,
  averagingExpirationMs: 12_000,
  averagingTimeoutMs: 10_000,
  senderTimeoutMs: 3000,
  reducerTimeoutMs: 5000,
  pollIntervalMs: 100,
};

/**
 * Eight nodes in one process, all matchmaking at once: a peer's first read of the group declarations
 * walks the DHT (a read asks 2 × replication servers, more than the seven others, so no lookup is
 * cached) while the other seven store and read too. Under load 18 on 2 cores that read took 8–9.4 s,
 * and one that outlasts the matchmaking time finds nobody ("only 1 of min 2 peers declared"). A group
 * that fills closes at once, so the window only bounds how long a starved machine may take; the
 * all-reduce's timeouts are as generous, since a reducer that drops a slow sender averages over 7.
 */
export const CROWDED: Omit<AveragerInit, 'prefix'> = {
  ...FAST,
  matchmakingTimeMs: 30_000,
  averagingExpirationMs: 40_000,
  averagingTimeoutMs: 60_000,
  senderTimeoutMs: 20_000,
  reducerTimeoutMs: 30_000,
};

/** startSwarm's wait for eight nodes in one process to serve the DHT and fill their routing tables, on a loaded machine. */
export const CROWDED_START_MS = 60_000;

export function averagers(t: TestContext, nodes: readonly SwarmNode[], init: (i: number) => AveragerInit): Averager[] {
  const list = nodes.map((node, i) => createAverager(node, init(i)));
  t.after(() => Promise.all(list.map((a) => a.stop())));
  return list;
}

/** Deterministic pseudo-random vector in [-scale, scale). */
export function randomVector(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * scale;
  });
}

/** The weighted mean computed directly, in float64. */
export function weightedMean(vectors: readonly Float32Array[], weights: readonly number[]): Float64Array {
  const total = weights.reduce((a, b) => a + b, 0);
  const out = new Float64Array(vectors[0]!.length);
  vectors.forEach((v, k) => v.forEach((x, i) => (out[i]! += (weights[k]! / total) * x)));
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>, from = 0, to = a.length): number {
  let m = 0;
  for (let i = from; i < to; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}
