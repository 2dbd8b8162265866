import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { allreduce } from '../../src/averaging/allreduce.js';
import { encode } from '../../src/averaging/compression.js';
import { ALLREDUCE_PROTOCOL, MAX_CONTROL_BYTES, MAX_DATA_FRAME_BYTES, STATE_PROTOCOL } from '../../src/averaging/constants.js';
import { FramedStream } from '../../src/averaging/framing.js';
import { groupInfo } from '../../src/averaging/group.js';
import { AveragingHub } from '../../src/averaging/hub.js';
import { reducerMessageSchema, stateHeaderSchema, type Begin, type StateRequest } from '../../src/averaging/messages.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { sendAllButLastByte } from '../helpers/hostile-stream.js';
import { startSwarm } from '../helpers/swarm.js';
import { maxAbsDiff, randomVector, weightedMean } from './helpers.js';

/** A raw all-reduce stream from `from` to `to` that starts with `begin`. */
async function open(from: SwarmNode, to: SwarmNode, begin: Begin): Promise<FramedStream> {
  const framed = new FramedStream(await from.dial(to.peerId.toString(), ALLREDUCE_PROTOCOL, { allowRelayed: false }), MAX_DATA_FRAME_BYTES, `reducer ${to.peerId.toString()}`);
  await framed.write(begin);
  return framed;
}

async function answer(framed: FramedStream): Promise<string> {
  const m = await framed.expect(reducerMessageSchema, AbortSignal.timeout(15_000), 'an answer');
  return m.t === 'refused' ? m.code : `chunk ${m.i}`;
}

test('raw all-reduce frames: a stranger, a member asking for another part, lying about its weight, opening a second stream or sending chunks out of order are refused with their codes and excluded; the honest members average without it', async (t) => {
  const [a, b, member, stranger] = await startSwarm(t, 4, { runId: 'hostile-frames' });
  const n = 8000;
  const chunkValues = 1000;
  const peer = (x: SwarmNode): string => x.peerId.toString();
  // the hostile member is listed in client mode: it reduces nothing, a and b reduce 4 chunks each
  const members = [a!, b!, member!].map((x) => ({ peer: peer(x), weight: 1, bandwidth: 1e6, clientMode: x === member }));
  const group = groupInfo({ id: 'a'.repeat(32), key: 'averaging/grad:0', schema: '0'.repeat(64), compression: 'none', size: n, chunkValues, members });
  const vectors = [randomVector(n, 1), randomVector(n, 2)];
  const honest = weightedMean(vectors, [1, 1]);
  // senders are only excluded for what they do here, never for a slow machine
  const opts = { senderTimeoutMs: 60_000, reducerTimeoutMs: 60_000, allreduceTimeoutMs: 120_000, maxAbs: 1e8, aggregation: 'mean' as const };
  const rounds = [a!, b!].map(async (x, i) => {
    const hub = AveragingHub.of(x);
    await hub.acquire();
    t.after(() => hub.release());
    return allreduce(x, hub, group, vectors[i]!, opts, pino({ level: 'silent' }));
  });
  const [partA, partB] = group.parts;
  assert.deepEqual([partA![1] - partA![0], partB![1] - partB![0]], [4000, 4000]);

  assert.equal(await answer(await open(stranger!, a!, { t: 'begin', group: group.id, part: 0, weight: 1 })), 'NOT_A_MEMBER');
  assert.equal(await answer(await open(member!, a!, { t: 'begin', group: group.id, part: 1, weight: 1 })), 'NOT_A_REDUCER');
  assert.equal(await answer(await open(member!, a!, { t: 'begin', group: group.id, part: 0, weight: 5 })), 'BAD_BEGIN');
  // b's part: chunk 0 (the honest mean: what it delivered stays in), proven accepted by its average;
  // then a second stream, then chunk 2 where chunk 1 is due
  const first = await open(member!, b!, { t: 'begin', group: group.id, part: 1, weight: 1 });
  await first.writeChunk(0, encode('none', Float32Array.from(honest.subarray(partB![0], partB![0] + chunkValues))));
  assert.equal(await answer(first), 'chunk 0');
  assert.equal(await answer(await open(member!, b!, { t: 'begin', group: group.id, part: 1, weight: 1 })), 'BAD_BEGIN');
  await first.writeChunk(2, encode('none', new Float32Array(chunkValues)));
  assert.equal(await answer(first), 'EXCLUDED');
  assert.equal(await answer(await open(stranger!, a!, { t: 'begin', group: 'f'.repeat(32), part: 0, weight: 1 })), 'UNKNOWN_GROUP');

  const results = await Promise.all(rounds);
  const reasons = results.map((r) => new Map(r.excluded.map((x) => [x.peer, x.reason])).get(peer(member!)));
  assert.match(reasons[0] ?? '', /claimed weight 5, the group agreed on 1/);
  assert.match(reasons[1] ?? '', /sent chunk 2, expected chunk 1/);
  for (const r of results) {
    assert.equal(r.status, 'complete', r.failedParts.map((p) => p.reason).join('; '));
    assert.ok(maxAbsDiff(r.vector, honest) <= 1e-6, `max abs err ${maxAbsDiff(r.vector, honest)}`);
  }
});

test('a stranger cannot make a node hold a 4 MiB frame before its first message: an all-reduce stream whose first frame claims more than a control message is reset at once', { timeout: 60_000 }, async (t) => {
  const [honest, stranger] = await startSwarm(t, 2, { runId: 'hostile-first-frame' });
  const hub = AveragingHub.of(honest!);
  await hub.acquire();
  t.after(() => hub.release());
  // a data frame's length (as a chunk would claim), then all but its last byte: held until the
  // first-message timeout, 16 such streams per connection would keep 64 MiB of a node's memory
  await sendAllButLastByte(await stranger!.dial(honest!.peerId.toString(), ALLREDUCE_PROTOCOL, { allowRelayed: false }), MAX_DATA_FRAME_BYTES - 1);
  // a request answered on the same connection after those bytes: the node has handled them by then
  const state = new FramedStream(await stranger!.dial(honest!.peerId.toString(), STATE_PROTOCOL, { allowRelayed: false }), MAX_CONTROL_BYTES, 'state');
  await state.write({ t: 'get', prefix: 'none' } satisfies StateRequest);
  assert.equal((await state.expect(stateHeaderSchema, AbortSignal.timeout(15_000), 'an answer')).t, 'refused');
  const held = honest!.libp2p.getConnections().flatMap((c) => c.streams).filter((s) => s.protocol?.endsWith(ALLREDUCE_PROTOCOL));
  assert.deepEqual(held.map((s) => s.status), [], 'the all-reduce stream was reset, not held open for its frame');
});
