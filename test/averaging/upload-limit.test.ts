import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AveragingHub } from '../../src/averaging/hub.js';
import { UploadLimit } from '../../src/averaging/upload-limit.js';
import { startSwarm } from '../helpers/swarm.js';
import { averagers, FAST, maxAbsDiff, randomVector, weightedMean } from './helpers.js';

test('the upload limit never lets bytes out faster than the cap, and gives up waiting when aborted', async () => {
  const limit = new UploadLimit(64 * 1024);
  const started = performance.now();
  await limit.take(100 * 1024); // more than the one-second bucket: taken in pieces
  await limit.take(28 * 1024);
  const seconds = (performance.now() - started) / 1000;
  // the bucket starts empty, so 128 KiB at 64 KiB/s cannot take less than 2 s (a busy machine only adds)
  assert.ok(seconds >= 1.95, `128 KiB passed a 64 KiB/s cap in ${seconds.toFixed(2)} s`);

  const controller = new AbortController();
  const waiting = limit.take(64 * 1024, controller.signal);
  controller.abort(new Error('averaging cancelled'));
  await assert.rejects(waiting, /averaging cancelled/);
  assert.throws(() => new UploadLimit(0), /positive/);
});

test('a peer with an upload cap declares it as its bandwidth, reduces no part when far slower than the others, sends no faster than the cap, and the average is exact', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'avg-upload-cap' });
  const cap = 48 * 1024;
  const avg = averagers(t, nodes, (i) => ({ prefix: 'grad', ...FAST, averagingTimeoutMs: 60_000, senderTimeoutMs: 30_000, reducerTimeoutMs: 30_000, targetGroupSize: 3, chunkValues: 4096, ...(i === 0 ? { uploadLimitBytesPerS: cap } : { bandwidthBytesPerS: 4 * cap }) }));
  const n = 30_000;
  const vectors = [0, 1, 2].map((i) => randomVector(n, 90 + i));
  const weights = [3, 1, 2];
  const results = await Promise.all(avg.map((a, i) => a.step(vectors[i]!, { epoch: 0, weight: weights[i]! })));
  const expected = weightedMean(vectors, weights);
  const capped = nodes[0]!.peerId.toString();
  for (const r of results) {
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.equal(r.status, 'complete');
    assert.ok(maxAbsDiff(r.vector, expected) <= 1e-6, `max abs err ${maxAbsDiff(r.vector, expected)}`);
    const k = r.group.members.findIndex((m) => m.peer === capped);
    assert.equal(r.group.members[k]!.bandwidth, cap, 'the cap is the bandwidth the peer declares');
    // the load-balancing LP: moving its whole vector at the cap already takes longer than the others
    // take with half each, so it reduces nothing
    const [s, e] = r.group.parts[k]!;
    const size: number = e - s;
    assert.equal(size, 0, `the capped peer reduces no part (it got ${size} of ${n} values)`);
  }
  const mine = results[0]!;
  assert.ok(mine.ok);
  // what it wrote, minus the one-second burst the bucket may hold, at the cap's rate at best
  const floor = (mine.bytesSent - cap) / cap;
  assert.ok(floor > 1, `enough traffic to measure the cap (${mine.bytesSent} bytes)`);
  assert.ok(mine.durationMs / 1000 >= floor * 0.95, `${mine.bytesSent} bytes left in ${mine.durationMs} ms under a ${cap} B/s cap`);
  // every averager of the node asking for this cap shares the one bucket; another cap replaces it
  const hub = AveragingHub.of(nodes[0]!);
  const bucket = hub.upload;
  assert.equal(bucket?.bytesPerSecond, cap);
  hub.limitUpload(cap);
  assert.equal(hub.upload, bucket);
  hub.limitUpload(2 * cap);
  assert.equal(hub.upload?.bytesPerSecond, 2 * cap);
});
