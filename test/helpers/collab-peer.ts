import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { pino } from 'pino';
import { CollaborativeOptimizer, type StepOutcome } from '../../src/collab/optimizer.js';
import type { CollaborativeOptions } from '../../src/collab/options.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer, type Optimizer } from '../../src/engine/optim/index.js';
import type { ParameterSet } from '../../src/engine/params.js';
import type { Logger } from '../../src/log/logger.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { randomVector } from '../averaging/helpers.js';

/** CollaborativeOptimizer peers on in-process swarm nodes with synthetic gradients (no engine). */
export const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
export const BASE: CollaborativeOptions = { targetBatchSize: 32, matchmakingTime: 2, averagingTimeout: 10, maxRefresh: 1, peakLr: 0.01, warmupSteps: 1, totalSteps: 1000 };

export interface Peer {
  readonly params: ParameterSet;
  readonly optimizer: Optimizer;
  readonly collab: CollaborativeOptimizer;
  readonly grads: ParameterSet;
}

/**
 * A peer on `node` whose optimizer is not started yet (its gradient: a direction of its own).
 * `optimizer` wraps the LAMB optimizer the peer steps with (a test double of a broken engine).
 */
export function unstarted(t: TestContext, node: SwarmNode, seed: number, options: Partial<CollaborativeOptions>, log: Logger = pino({ level: 'silent' }), optimizer: (lamb: Optimizer) => Optimizer = (lamb) => lamb): Peer {
  const params = initAlbertParams(config, seed);
  const opt = optimizer(createOptimizer(params, { kind: 'lamb' }));
  const collab = new CollaborativeOptimizer(node, config, params, opt, { ...BASE, ...options }, log);
  t.after(() => collab.stop());
  const grads = params.zerosLike();
  grads.data.set(randomVector(grads.size, 100 + seed, 0.01));
  return { params, optimizer: opt, collab, grads };
}

/** Feeds 4-sample micro-batches (1 s each by the clock the optimizer is told) until the peer steps to the next epoch. */
export async function trainOneEpoch(p: Peer): Promise<Extract<StepOutcome, { type: 'stepped' }>> {
  for (let i = 0; i < 400; i++) {
    const outcome = await p.collab.step(p.grads, 4, 1, 1);
    if (outcome.type === 'stepped') return outcome;
    assert.equal(outcome.type, 'accumulated');
    await new Promise((r) => setTimeout(r, 40));
  }
  throw new Error('no step within 400 micro-batches');
}
