// What the dashboard and the log say of an epoch's averaging, from the events of real averaging rounds:
// two in-process peers of a PowerSGD run that also averages state every epoch, each with the sink a
// swarm peer has (src/training/swarm-peer.ts), fed as it feeds it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { AllreduceResult, AveragingEvent } from '../../src/averaging/index.js';
import { CollaborativeOptimizer } from '../../src/collab/optimizer.js';
import { averagingModeOf, type CollaborativeOptions } from '../../src/collab/options.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { StoreView } from '../../src/node/store-view.js';
import { openStore } from '../../src/store/index.js';
import { TrainingSink } from '../../src/training/sink.js';
import { randomVector } from '../averaging/helpers.js';
import { BASE, config, trainOneEpoch, type Peer } from '../helpers/collab-peer.js';
import { capturingLogger } from '../helpers/log.js';
import { startSwarm } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const OPTIONS: Partial<CollaborativeOptions> = { gradAverager: 'powersgd', powersgdRank: 1, averageStateEvery: 1 };

test("an epoch's averaging figures are the run's mode and every round of the epoch: PowerSGD's gradient round and the plain state-averaging round after it", { timeout: 90_000 }, async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'epoch-averaging' });
  const peers = nodes.map((node, i) => {
    const store = openStore(tmpDir(t));
    t.after(() => store.close());
    const { log, lines } = capturingLogger();
    const sink = new TrainingSink(store, log, averagingModeOf(OPTIONS));
    const rounds: Array<{ mode: string; result: AllreduceResult }> = [];
    const onRound = (label: string, event: AveragingEvent): void => {
      if (event.type === 'averaged') rounds.push({ mode: event.mode, result: event.result });
      sink.handle({ type: 'averaging', round: label, event, at: Date.now() });
    };
    const params = initAlbertParams(config, i + 1);
    const optimizer = createOptimizer(params, { kind: 'lamb' });
    const collab = new CollaborativeOptimizer(node, config, params, optimizer, { ...BASE, ...OPTIONS }, pino({ level: 'silent' }), { averaging: onRound });
    t.after(() => collab.stop());
    const grads = params.zerosLike();
    grads.data.set(randomVector(grads.size, 100 + i, 0.01));
    return { store, sink, lines, rounds, peer: { params, optimizer, collab, grads } satisfies Peer };
  });
  await Promise.all(peers.map((p) => p.peer.collab.start()));
  const steps = await Promise.all(peers.map((p) => trainOneEpoch(p.peer)));
  for (const [i, p] of peers.entries()) {
    const s = steps[i]!;
    assert.equal(s.averagedWith, 2, `peer ${i} averaged its gradient`);
    assert.deepEqual(s.stateAveraging, { averagedWith: 2 }, `peer ${i} averaged its state`);
    assert.deepEqual(p.rounds.map((r) => r.mode), ['powersgd', 'plain'], `peer ${i}: the state round is the epoch's last`);
    p.sink.handle({ type: 'stepped', epoch: s.epoch, loss: s.loss, alone: false, contributed: p.peer.collab.contributed, at: Date.now() });
    const [grad, state] = p.rounds.map((r) => r.result) as [AllreduceResult, AllreduceResult];
    const ratio = grad.powerSgd!.ratio;
    assert.ok(ratio > 1, `PowerSGD rank 1 sends fewer values (${ratio}×)`);
    const compression = (grad.vector.length + state.vector.length) / (grad.vector.length / ratio + state.vector.length);
    const swarm = new StoreView(p.store).swarm();
    assert.deepEqual([swarm.averagingEpoch, swarm.averagingMode, swarm.averagingBytesSent, swarm.averagingCompression], [1, 'powersgd', grad.bytesSent + state.bytesSent, compression], `peer ${i}'s dashboard figures`);
    const line = p.lines.map((l) => (JSON.parse(l) as { msg: string }).msg).find((m) => m.startsWith('Epoch #1 averaging'));
    assert.equal(line, `Epoch #1 averaging: PowerSGD, ${((grad.bytesSent + state.bytesSent) / 1e6).toPrecision(3)} MB sent in 2 all-reduces, ${compression.toFixed(1)}× fewer values than plain averaging`, `peer ${i}'s log line`);
  }
});
