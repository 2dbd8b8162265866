import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { z } from 'zod';
import { StateDownloadError, type LoadedState, type StateSnapshot } from '../../src/averaging/index.js';
import { AveragingHub, type Handler } from '../../src/averaging/hub.js';
import { MAX_STATE_CHUNK_BYTES, STATE_PROTOCOL } from '../../src/averaging/constants.js';
import { FramedStream } from '../../src/averaging/framing.js';
import { stateDataSchema, stateHeaderSchema, type StateRequest } from '../../src/averaging/messages.js';
import type { SwarmNode } from '../../src/swarm/index.js';
import { warningLog } from '../helpers/log.js';
import { startSwarm, waitFor } from '../helpers/swarm.js';
import { averagers } from './helpers.js';

const STATE = { chunkBytes: 64 * 1024, stallTimeoutMs: 3000, advertiseIntervalMs: 5000 };

/** Makes the state server `node` runs under 'state' answer downloads with `handler` (it keeps serving its provider): a lying donor. */
function answerStateWith(node: SwarmNode, handler: Handler<StateRequest>): void {
  const servers = AveragingHub.of(node).stateServers;
  servers.set('state', { provider: servers.get('state')!.provider, handler });
}

test('a newcomer loads the newest state bitwise equal to the donor’s', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-basic' });
  const [older, donor, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const data = randomBytes(1_000_003); // not a multiple of the chunk size
  const snapshot: StateSnapshot = { epoch: 12, data, metadata: { step: 12, optimizer: 'lamb' } };
  await donor!.serveState({ epoch: () => 12, snapshot: () => snapshot });
  await older!.serveState({ epoch: () => 11, snapshot: () => ({ epoch: 11, data: randomBytes(10) }) });
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.donor, nodes[1]!.peerId.toString());
  assert.equal(loaded.epoch, 12);
  assert.deepEqual(loaded.metadata, { step: 12, optimizer: 'lamb' });
  assert.ok(Buffer.from(loaded.data).equals(data), 'downloaded bytes equal the donor’s');
  assert.deepEqual(loaded.failed, []);
  // minEpoch: nobody serves epoch 13 yet
  await assert.rejects(newcomer!.loadStateFromPeers({ minEpoch: 13 }), (err: Error) => err instanceof StateDownloadError && /no peer advertises state/.test(err.message));
});

test('two averagers of one node: one hands the state serving to the other, which its later stop leaves serving, and each reads the other’s state', async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'state-handover' });
  // node 0 runs a coordinator's averager and a trainer's (the app's switch beside Start), node 1 is a newcomer
  const [coordinator, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const [trainer] = averagers(t, [nodes[0]!], () => ({ prefix: 'state', state: STATE }));
  const checkpoint = randomBytes(1000);
  const served = await coordinator!.serveState({ epoch: () => 4, snapshot: () => ({ epoch: 4, data: checkpoint }) });
  assert.equal(coordinator!.localState(), undefined, 'its own state is not another’s');
  assert.equal(trainer!.localState()?.epoch(), 4);
  await assert.rejects(trainer!.serveState({ epoch: () => 5, snapshot: () => ({ epoch: 5, data: randomBytes(10) }) }), /already served on this node/);
  await served.withdraw();
  const live = randomBytes(2000);
  await trainer!.serveState({ epoch: () => 5, snapshot: () => ({ epoch: 5, data: live }) });
  await coordinator!.stop(); // stopping again (after the withdrawal) leaves the trainer's server alone
  assert.equal(trainer!.localState(), undefined);
  let loaded: LoadedState | undefined;
  await waitFor('the trainer’s advertisement', async () => (loaded = await newcomer!.loadStateFromPeers({ minEpoch: 5 }).catch(() => undefined)) !== undefined, 30_000);
  assert.ok(Buffer.from(loaded!.data).equals(live), 'the newcomer downloads the trainer’s state');
});

test('a busy donor refuses with BUSY and the newcomer falls back to the next one', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'state-busy' });
  // a stall timeout no loaded machine reaches: the second newcomer must hear BUSY, not give up on the donor first
  const [busy, spare, first, second] = averagers(t, nodes, () => ({ prefix: 'state', state: { ...STATE, stallTimeoutMs: 15_000, maxConcurrentDownloads: 1 } }));
  let release!: () => void;
  let occupied!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const slotTaken = new Promise<void>((resolve) => (occupied = resolve));
  const newest = randomBytes(200_000);
  await busy!.serveState({
    epoch: () => 9,
    snapshot: async () => {
      occupied();
      await held; // the first download occupies the donor's only slot
      return { epoch: 9, data: newest };
    },
  });
  const fallback = randomBytes(100_000);
  await spare!.serveState({ epoch: () => 8, snapshot: () => ({ epoch: 8, data: fallback }) });
  const slow = first!.loadStateFromPeers();
  // once the first download holds the slot, a second newcomer asks
  await slotTaken;
  const loaded = await second!.loadStateFromPeers();
  assert.equal(loaded.donor, nodes[1]!.peerId.toString());
  assert.equal(loaded.epoch, 8);
  assert.ok(Buffer.from(loaded.data).equals(fallback));
  assert.equal(loaded.failed.length, 1);
  assert.match(loaded.failed[0]!.error, /^BUSY: /);
  release();
  const got = await slow;
  assert.equal(got.epoch, 9);
  assert.ok(Buffer.from(got.data).equals(newest));
});

test('a donor sending a chunk a second (never stalling) is left for the next once its download averages under the minimum rate; the last donor left is given its time', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-slow' });
  const [honest, slow, newcomer] = averagers(t, nodes, (i) => ({ prefix: 'state', state: { ...STATE, minBytesPerSecond: 256 * 1024 }, ...(i === 1 ? { uploadLimitBytesPerS: 64 * 1024 } : {}) }));
  const fallback = randomBytes(100_000);
  const served = await honest!.serveState({ epoch: () => 8, snapshot: () => ({ epoch: 8, data: fallback }) });
  // the newest state, 8 chunks of 64 KiB at 64 KiB/s: one a second, well within the 3 s stall timeout
  const newest = randomBytes(8 * 64 * 1024);
  await slow!.serveState({ epoch: () => 9, snapshot: () => ({ epoch: 9, data: newest }) });
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.donor, nodes[0]!.peerId.toString());
  assert.ok(Buffer.from(loaded.data).equals(fallback));
  assert.deepEqual(loaded.failed.map((f) => f.peer), [nodes[1]!.peerId.toString()]);
  assert.match(loaded.failed[0]!.error, /sent \d+ of 524288 bytes in \d+ s, under the 262144 bytes\/s a donor must keep/);
  // alone, the slow donor is the last one left: a swarm whose donors are all slow still hands over a state
  await served.withdraw();
  const alone = await newcomer!.loadStateFromPeers();
  assert.equal(alone.donor, nodes[1]!.peerId.toString());
  assert.ok(Buffer.from(alone.data).equals(newest));
});

/**
 * A slow reader's download of `donor`'s state: it takes one yamux window (about 1 MiB) every 4 s and
 * keeps the stream paused in between, so yamux grants the donor no more (and does not widen the
 * window: that takes data read within 4 round trips of the last). The donor's writes wait on it well
 * within their stall timeout (10 s below): it never stalls. `read` is the state's bytes it got once
 * the donor closed the download, and rejects when the donor ended it.
 */
async function trickle(t: TestContext, reader: SwarmNode, donor: SwarmNode): Promise<{ readonly framed: FramedStream; readonly read: Promise<number> }> {
  const stream = await reader.dial(donor.peerId.toString(), STATE_PROTOCOL, { allowRelayed: false });
  stream.pause();
  const framed = new FramedStream(stream, MAX_STATE_CHUNK_BYTES + 1024, 'a trickling reader');
  const over = new AbortController();
  // frames are taken as they come: a FramedStream holding over READ_HIGH_WATER_BYTES would pause and resume the stream itself
  const read = (async () => {
    let bytes = 0;
    for (let m; (m = await framed.read(z.union([stateHeaderSchema, stateDataSchema]), over.signal)) !== null; ) if (m.t === 'data') bytes += m.d.byteLength;
    return bytes;
  })();
  read.catch(() => undefined);
  const timer = setInterval(() => {
    try {
      stream.resume();
      stream.pause();
    } catch {
      clearInterval(timer); // the donor ended or refused the download
    }
  }, 4000);
  t.after(() => {
    clearInterval(timer);
    over.abort();
    stream.abort(new Error('test over'));
  });
  await framed.write({ t: 'get', prefix: 'state' } satisfies StateRequest);
  return { framed, read };
}

/** What `donor` answers an honest request for its state: the refusal's message, or 'served'. */
async function answer(reader: SwarmNode, donor: SwarmNode): Promise<string> {
  const framed = new FramedStream(await reader.dial(donor.peerId.toString(), STATE_PROTOCOL, { allowRelayed: false }), MAX_STATE_CHUNK_BYTES + 1024, 'a request');
  await framed.write({ t: 'get', prefix: 'state' } satisfies StateRequest);
  const header = await framed.expect(stateHeaderSchema, AbortSignal.timeout(30_000), 'the state header');
  framed.abort(new Error('only the answer was wanted'));
  return header.t === 'refused' ? `${header.code}: ${header.message}` : 'served';
}

/** 12 MiB: far beyond the window, the donor's write queue and the reader's buffers, so a reader that stops reading blocks the donor. */
const LARGE = 12 * 1024 * 1024;
/** A floor of 4 MiB/s: a reader of 12 MiB may keep the donor waiting 10 s + 3 s; the hostile one would take 40 s, an honest one a fraction of a second. */
const FLOOR = { ...STATE, stallTimeoutMs: 10_000, minBytesPerSecond: 4 * 1024 * 1024 };

test('a reader draining a donor under the floor (never stalling) is ended, then refused BUSY when it asks again', { timeout: 120_000 }, async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'state-slow-reader' });
  const [donor] = averagers(t, [nodes[0]!], () => ({ prefix: 'state', state: FLOOR }));
  await donor!.serveState({ epoch: () => 3, snapshot: () => ({ epoch: 3, data: randomBytes(LARGE) }) });
  const hostile = await trickle(t, nodes[1]!, nodes[0]!);
  await assert.rejects(hostile.read, 'the donor ends the download');
  assert.match(await answer(nodes[1]!, nodes[0]!), /^BUSY: a transfer to you was ended for reading too slowly; refused for \d+ s more$/);
});

test('a peer gets one of a donor’s download slots: while a hostile reader trickles on two streams, a newcomer loads the state', { timeout: 120_000 }, async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-per-peer' });
  const [donor, newcomer] = averagers(t, [nodes[0]!, nodes[2]!], () => ({ prefix: 'state', state: { ...FLOOR, maxConcurrentDownloads: 2 } }));
  const data = randomBytes(LARGE);
  await donor!.serveState({ epoch: () => 3, snapshot: () => ({ epoch: 3, data }) });
  // each stream has its answer (a header, or a refusal) once the reader took a first window
  for (let i = 0; i < 2; i++) {
    const hostile = await trickle(t, nodes[1]!, nodes[0]!);
    await waitFor('the donor to answer the trickling reader', () => hostile.framed.received > 0);
  }
  assert.match(await answer(nodes[1]!, nodes[0]!), /^BUSY: serving 1 transfer\(s\) to you already \(limit 1 per peer\)$/);
  const loaded = await newcomer!.loadStateFromPeers();
  assert.ok(Buffer.from(loaded.data).equals(data));
  assert.deepEqual(loaded.failed, []);
});

test('a reader slower than the donor’s write queue gets the whole state: the donor waits for it to take the queue, each window within the stall timeout', { timeout: 120_000 }, async (t) => {
  const nodes = await startSwarm(t, 2, { runId: 'state-slow-honest' });
  // about 256 KiB/s, over a 64 KiB/s floor; the last 4 MiB queued take it 16 s, more than the 10 s stall timeout
  const [donor] = averagers(t, [nodes[0]!], () => ({ prefix: 'state', state: { ...FLOOR, minBytesPerSecond: 64 * 1024 } }));
  const size = 6 * 1024 * 1024;
  await donor!.serveState({ epoch: () => 3, snapshot: () => ({ epoch: 3, data: randomBytes(size) }) });
  const reader = await trickle(t, nodes[1]!, nodes[0]!);
  assert.equal(await reader.read, size);
});

test('a donor whose bytes do not match its checksum is skipped for the next one', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-liar' });
  const [liar, honest, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const truth = randomBytes(150_000);
  await liar!.serveState({ epoch: () => 30, snapshot: () => ({ epoch: 30, data: randomBytes(10) }) });
  // the liar announces a checksum of other bytes than it sends
  answerStateWith(nodes[0]!, async (framed) => {
    const data = randomBytes(100_000);
    await framed.write({ t: 'header', epoch: 30, size: data.byteLength, sha256: new Uint8Array(32), chunkBytes: 65536, metadata: {} });
    for (let at = 0; at < data.byteLength; at += 65536) await framed.write({ t: 'data', d: data.subarray(at, at + 65536) });
    await framed.close();
  });
  await honest!.serveState({ epoch: () => 29, snapshot: () => ({ epoch: 29, data: truth }) });
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.epoch, 29);
  assert.ok(Buffer.from(loaded.data).equals(truth));
  assert.match(loaded.failed[0]?.error ?? '', /sha256 mismatch/);
});

test('a donor advertising an epoch no other donor backs (10⁹) is skipped; one sending a later epoch than it advertised is refused', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'state-bogus' });
  const [bogus, claimant, honest, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const truth = randomBytes(50_000);
  await bogus!.serveState({ epoch: () => 1_000_000_000, snapshot: () => ({ epoch: 1_000_000_000, data: randomBytes(10) }) });
  // advertises epoch 7 like an honest peer one step ahead, but its download says 10⁹
  await claimant!.serveState({ epoch: () => 7, snapshot: () => ({ epoch: 7, data: randomBytes(10) }) });
  answerStateWith(nodes[1]!, async (framed) => {
    const data = new Uint8Array(4);
    await framed.write({ t: 'header', epoch: 1_000_000_000, size: data.byteLength, sha256: createHash('sha256').update(data).digest(), chunkBytes: 65536, metadata: {} });
    await framed.write({ t: 'data', d: data });
    await framed.close();
  });
  await honest!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: truth }) });
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.donor, nodes[2]!.peerId.toString());
  assert.equal(loaded.epoch, 6);
  assert.ok(Buffer.from(loaded.data).equals(truth));
  assert.deepEqual(loaded.failed.map((f) => [f.peer, f.error]), [[nodes[1]!.peerId.toString(), 'sent a state of epoch 1000000000, but advertised epoch 7']], 'the 10⁹ donor was not even tried');
  assert.equal(await newcomer!.advertisedStateEpoch(), 7, 'the newest advertised epoch is the backed one, not 10⁹');
});

test('a donor of another Cohort release (no state/2.0.0) is named once and not dialed again: later loads and the advertised epoch leave it out', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-release' });
  const log = warningLog();
  const [honest, newcomer] = averagers(t, nodes.slice(1), (i) => ({ prefix: 'state', state: STATE, ...(i === 1 ? { log: log.log } : {}) }));
  const truth = randomBytes(10_000);
  await honest!.serveState({ epoch: () => 5, snapshot: () => ({ epoch: 5, data: truth }) });
  // a release whose state protocol has another version advertises under the same key, one epoch ahead (within the unbacked limit), and answers no state/2.0.0 dial
  const old = nodes[0]!.peerId.toString();
  await AveragingHub.of(nodes[0]!).donors.store('state/state', '', { epoch: 6, canServe: true }, Date.now() + 600_000);
  await waitFor('both advertisements', async () => (await AveragingHub.of(nodes[2]!).donors.get('state/state')).size >= 2);
  const first = await newcomer!.loadStateFromPeers();
  assert.ok(Buffer.from(first.data).equals(truth));
  assert.deepEqual(first.failed.map((f) => f.peer), [old], 'the old release is tried first (the newest epoch)');
  assert.match(first.failed[0]!.error, new RegExp(`does not speak .*${STATE_PROTOCOL}: it runs another Cohort release`));
  const again = await newcomer!.loadStateFromPeers();
  assert.ok(Buffer.from(again.data).equals(truth));
  assert.deepEqual(again.failed, [], 'not dialed again');
  assert.equal(await newcomer!.advertisedStateEpoch(), 5, 'its epoch is not one to catch up with');
  const told = log.warnings.filter((w) => w.includes(old));
  assert.equal(told.length, 1, log.warnings.join('\n'));
  assert.match(told[0]!, /not loading state from .*, now or later: .*another Cohort release/);
});

/** Waits until `reader` sees `count` donor advertisements carrying a hash (each donor hashes its state in the background). */
async function hashesAdvertised(reader: SwarmNode, count: number): Promise<void> {
  const hub = AveragingHub.of(reader);
  await waitFor(`${count} hashed state advertisements`, async () => [...(await hub.donors.get('state/state')).values()].filter((e) => e.value.sha256 !== undefined).length >= count);
}

test('a donor advertising a later epoch with a hash nobody else advertises is skipped: the state two peers back is loaded', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'state-backed' });
  const [first, second, bogus, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const truth = randomBytes(80_000);
  await first!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: truth }) });
  await second!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: truth }) });
  // one epoch ahead, as an honest peer that just stepped would be: the epoch rule alone tried it first
  await bogus!.serveState({ epoch: () => 7, snapshot: () => ({ epoch: 7, data: randomBytes(80_000) }) });
  await hashesAdvertised(nodes[3]!, 3);
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.epoch, 6);
  assert.ok(Buffer.from(loaded.data).equals(truth));
  assert.deepEqual(loaded.failed, [], 'the unbacked donor was not even tried');
  assert.notEqual(loaded.donor, nodes[2]!.peerId.toString());
  assert.equal(await newcomer!.advertisedStateEpoch(), 6, 'the newest advertised epoch is the backed one');
});

test('a state the trusted peer (the join code\'s coordinator) advertises is backed on its own: it is loaded, checked against its hash', async (t) => {
  const nodes = await startSwarm(t, 4, { runId: 'state-trusted' });
  const coordinator = nodes[2]!.peerId.toString();
  const [first, second, trusted, newcomer] = averagers(t, nodes, (i) => ({ prefix: 'state', state: i === 3 ? { ...STATE, trusted: [coordinator] } : STATE }));
  const stale = randomBytes(80_000);
  const newest = randomBytes(80_000);
  await first!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: stale }) });
  await second!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: stale }) });
  // the same situation as above, but the peer one epoch ahead is the one the newcomer trusts
  await trusted!.serveState({ epoch: () => 7, snapshot: () => ({ epoch: 7, data: newest }) });
  await hashesAdvertised(nodes[3]!, 3);
  assert.equal(await newcomer!.advertisedStateEpoch(), 7, 'the trusted advertisement backs epoch 7');
  const loaded = await newcomer!.loadStateFromPeers();
  assert.equal(loaded.epoch, 7);
  assert.equal(loaded.donor, coordinator);
  assert.ok(Buffer.from(loaded.data).equals(newest));
});

test('a donor serving other bytes than the backed hash it advertised is skipped for the next donor', async (t) => {
  const nodes = await startSwarm(t, 3, { runId: 'state-backed-liar' });
  const [liar, honest, newcomer] = averagers(t, nodes, () => ({ prefix: 'state', state: STATE }));
  const truth = randomBytes(100_000);
  // the liar advertises the true state's hash, then serves other bytes under a header consistent with them
  await liar!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: truth }) });
  await honest!.serveState({ epoch: () => 6, snapshot: () => ({ epoch: 6, data: truth }) });
  await hashesAdvertised(nodes[2]!, 2);
  answerStateWith(nodes[0]!, async (framed) => {
    const data = randomBytes(100_000);
    await framed.write({ t: 'header', epoch: 6, size: data.byteLength, sha256: createHash('sha256').update(data).digest(), chunkBytes: 65536, metadata: {} });
    for (let at = 0; at < data.byteLength; at += 65536) await framed.write({ t: 'data', d: data.subarray(at, at + 65536) });
    await framed.close();
  });
  // donors of one state are tried in random order: load until the liar came first (20 tries: 2⁻²⁰ to miss it)
  let liarTried = false;
  for (let i = 0; i < 20 && !liarTried; i++) {
    const loaded = await newcomer!.loadStateFromPeers();
    assert.equal(loaded.donor, nodes[1]!.peerId.toString());
    assert.ok(Buffer.from(loaded.data).equals(truth));
    for (const f of loaded.failed) {
      assert.equal(f.peer, nodes[0]!.peerId.toString());
      assert.match(f.error, /^serves a state with sha256 [0-9a-f]{16}…, not the backed [0-9a-f]{16}… it advertised$/);
      liarTried = true;
    }
  }
  assert.ok(liarTried, 'the liar was tried first at least once');
});
