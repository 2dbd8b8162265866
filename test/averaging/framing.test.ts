import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../../src/runtime/polyfills.js';
import type { Stream } from '@libp2p/interface';
import { streamPair } from '@libp2p/utils';
import { Uint8ArrayList } from 'uint8arraylist';
import { z } from 'zod';
import { READ_HIGH_WATER_BYTES } from '../../src/averaging/constants.js';
import { FramedStream } from '../../src/averaging/framing.js';
import { beginSchema, CHUNK_FRAME_TAG, chunkHeader, chunkSchema, decodeMessage, reducerMessageSchema } from '../../src/averaging/messages.js';
import { startNode, waitFor } from '../helpers/swarm.js';

const signal = (): AbortSignal => AbortSignal.timeout(5000);

test('frames cross a stream in order, large ones included, and end with null on a clean close', async () => {
  const [a, b] = await streamPair();
  const out = new FramedStream(a, 8 << 20, 'test out');
  const inn = new FramedStream(b, 8 << 20, 'test in');
  const big = new Uint8Array(6 << 20).map((_, i) => i & 0xff); // larger than the read-ahead mark
  const writing = (async () => {
    for (let i = 0; i < 3; i++) await out.write({ t: 'chunk', i, d: i === 1 ? big : new Uint8Array([i]) });
    await out.close();
  })();
  const got = [];
  for (;;) {
    const m = await inn.read(chunkSchema, signal());
    if (m === null) break;
    got.push(m);
  }
  await writing;
  assert.deepEqual(got.map((m) => m.i), [0, 1, 2]);
  assert.ok(Buffer.from(got[1]!.d).equals(Buffer.from(big)));
  assert.equal(inn.received, out.sent);
});

test('binary chunk frames carry the payload as it is, between CBOR messages on the same stream', async () => {
  const [a, b] = await streamPair();
  const out = new FramedStream(a, 8 << 20, 'test out');
  const inn = new FramedStream(b, 8 << 20, 'test in');
  const values = Float32Array.from({ length: 300_000 }, (_, i) => Math.sin(i));
  const payload = new Uint8Array(values.buffer, 4, 4 * 200_000); // a view at an offset: sent without a copy
  await out.writeChunk(0xfffffffe, payload);
  await out.write({ t: 'refused', code: 'EXCLUDED', message: 'after a chunk' });
  await out.writeChunk(3, new Uint8Array(0));
  await out.close();
  const first = await inn.read(reducerMessageSchema, signal());
  assert.ok(first?.t === 'chunk');
  assert.equal(first.i, 0xfffffffe);
  assert.ok(Buffer.from(first.d).equals(Buffer.from(payload)));
  assert.deepEqual(await inn.read(reducerMessageSchema, signal()), { t: 'refused', code: 'EXCLUDED', message: 'after a chunk' });
  const empty = await inn.read(chunkSchema, signal());
  assert.equal(empty?.i, 3);
  assert.equal(empty?.d.byteLength, 0);
  assert.equal(await inn.read(chunkSchema, signal()), null);
  assert.equal(inn.received, out.sent);
  // a chunk frame where the schema expects another message, or shorter than its header, is refused
  const [c, d] = await streamPair();
  const writer = new FramedStream(c, 1024, 'out');
  await writer.writeChunk(1, new Uint8Array(8));
  await assert.rejects(new FramedStream(d, 1024, 'begin reader').read(beginSchema, signal()), /begin reader is malformed: t: /);
  assert.throws(() => decodeMessage(chunkSchema, Uint8Array.of(CHUNK_FRAME_TAG, 0, 0), 'short frame'), /short frame is malformed: a chunk frame of 3 bytes is shorter than its 5-byte header/);
  assert.throws(() => chunkHeader(2 ** 32), /32-bit unsigned integer/);
});

test('oversized frames, malformed messages and silence are errors, not hangs', async () => {
  // AbortSignal.timeout does not keep the event loop alive; this does, until the test ends
  const alive = setInterval(() => undefined, 1000);
  {
    const [a, b] = await streamPair();
    await new FramedStream(a, 1 << 20, 'out').write({ t: 'chunk', i: 0, d: new Uint8Array(2048) });
    await assert.rejects(new FramedStream(b, 1024, 'small reader').read(chunkSchema, signal()), /exceeds the limit of 1024/);
  }
  {
    const [a, b] = await streamPair();
    await new FramedStream(a, 1 << 20, 'out').writeChunk(0, new Uint8Array(2048));
    await assert.rejects(new FramedStream(b, 1024, 'small reader').read(chunkSchema, signal()), /exceeds the limit of 1024/);
  }
  {
    const [a, b] = await streamPair();
    await new FramedStream(a, 1024, 'out').write({ t: 'chunk', i: -1, d: 'not bytes' });
    await assert.rejects(new FramedStream(b, 1024, 'reader').read(chunkSchema, signal()), /reader is malformed/);
  }
  {
    const [, b] = await streamPair();
    await assert.rejects(new FramedStream(b, 1024, 'reader').read(z.unknown(), AbortSignal.timeout(100)), /TimeoutError|timeout/i);
  }
  clearInterval(alive);
});

test('chunks read as the parts they arrived in (expectChunk) or joined in a reused buffer (expectTransient) carry the bytes sent', async () => {
  const [a, b] = await streamPair();
  const out = new FramedStream(a, 8 << 20, 'test out');
  const inn = new FramedStream(b, 8 << 20, 'test in');
  const big = new Uint8Array(3 << 20).map((_, i) => (i * 7) & 0xff);
  const other = new Uint8Array(1 << 20).map((_, i) => (i * 13) & 0xff);
  const listChunk = z.strictObject({ t: z.literal('chunk'), i: z.number(), d: z.instanceof(Uint8ArrayList) });
  const writing = (async () => {
    await out.writeChunk(0, big);
    await out.writeChunk(1, big);
    await out.writeChunk(2, other);
    await out.write({ t: 'refused', code: 'EXCLUDED', message: 'a message where a chunk is due' });
    await out.close();
  })();
  const first = await inn.expectChunk(listChunk, signal(), 'chunk 0');
  assert.equal(first.i, 0);
  assert.ok(Buffer.from(first.d.subarray()).equals(Buffer.from(big)));
  const second = await inn.expectTransient(chunkSchema, signal(), 'chunk 1');
  assert.ok(Buffer.from(second.d).equals(Buffer.from(big)));
  assert.equal(second.i, 1);
  const third = await inn.expectTransient(chunkSchema, signal(), 'chunk 2');
  assert.ok(Buffer.from(third.d).equals(Buffer.from(other)));
  await assert.rejects(inn.expectChunk(listChunk, signal(), 'chunk 3'), /test in is malformed: t: /);
  await writing;
  assert.equal(inn.received, out.sent);
});

test('a reader taking a large transfer over yamux in bursts holds at most one window while paused, also after a resume that hands it more than the high-water mark', async (t) => {
  const [sender, receiver] = await Promise.all([startNode(t, { runId: 'framing-test' }), startNode(t, { runId: 'framing-test' })]);
  let accepted!: (framed: FramedStream) => void;
  const reader = new Promise<FramedStream>((resolve) => (accepted = resolve));
  await receiver.handle('bulk/1.0.0', (stream: Stream) => accepted(new FramedStream(stream, 1 << 20, 'bulk in')), { allowRelayed: false });
  const out = new FramedStream(await sender.dial(receiver.multiaddrs()[0]!, 'bulk/1.0.0', { allowRelayed: false }), 1 << 20, 'bulk out');
  const frames = 128; // 64 MiB
  const payload = (i: number): Uint8Array => new Uint8Array(512 * 1024).fill(i);
  let written = false;
  const writing = (async () => {
    for (let i = 0; i < frames; i++) await out.writeChunk(i, payload(i));
    await out.close();
  })().finally(() => (written = true));
  writing.catch(() => undefined);
  const inn = await reader;
  // @chainsafe/libp2p-yamux's default maxStreamWindowSize: what a paused stream may still be sent
  const yamuxWindow = 16 * 1024 * 1024;
  let mostHeld = 0;
  for (let i = 0; i < frames; ) {
    // the reader takes nothing until the sender has sent all the window yamux granted (its receive window left, internal, is 0)
    await waitFor('the sender to use up its window', () => written || inn.stream.status !== 'open' || (inn.stream as unknown as { recvWindowCapacity: number }).recvWindowCapacity === 0);
    mostHeld = Math.max(mostHeld, inn.stream.readBufferLength);
    assert.ok(inn.stream.readBufferLength <= yamuxWindow, `${inn.stream.readBufferLength} bytes held by a paused stream`);
    // then a burst of 4 MiB: the queue falls under half the high-water mark, and the resume hands it all that was held
    for (const end = Math.min(frames, i + 8); i < end; i++) {
      const m = await inn.read(chunkSchema, signal());
      assert.equal(m?.i, i);
      assert.ok(Buffer.from(m.d).equals(Buffer.from(payload(i))), `frame ${i} arrived intact`);
    }
  }
  assert.equal(await inn.read(chunkSchema, signal()), null);
  await writing;
  assert.ok(mostHeld > READ_HIGH_WATER_BYTES, `a resume handed the reader ${mostHeld} bytes, more than the high-water mark`);
});

test('a stream of small frames whose reader takes nothing (a node serving a join while the peer sends junk) stops the sender a few frames past the read, not at the 4 MiB read-ahead', async (t) => {
  const [sender, receiver] = await Promise.all([startNode(t, { runId: 'framing-junk' }), startNode(t, { runId: 'framing-junk' })]);
  let accepted!: (framed: FramedStream) => void;
  const reader = new Promise<FramedStream>((resolve) => (accepted = resolve));
  const maxFrameBytes = 64 * 1024;
  await receiver.handle('junk/1.0.0', (stream: Stream) => accepted(new FramedStream(stream, maxFrameBytes, 'junk in')), { allowRelayed: false });
  const out = new FramedStream(await sender.dial(receiver.multiaddrs()[0]!, 'junk/1.0.0', { allowRelayed: false }), 1 << 20, 'junk out');
  let written = false;
  const writing = (async () => {
    for (let i = 0; i < 64; i++) await out.writeChunk(i, new Uint8Array(512 * 1024).fill(i)); // 32 MiB
  })().finally(() => (written = true));
  writing.catch(() => undefined);
  const inn = await reader;
  // the sender stops when it has used up the window yamux granted: what the receiver holds then is all it ever will
  await waitFor('the sender to use up its window', () => written || (inn.stream as unknown as { recvWindowCapacity: number }).recvWindowCapacity === 0);
  assert.equal(written, false, 'the sender was stopped');
  // paused past 4 frames of the cap (256 KiB): that, one message and yamux's first window (256 KiB); paused only past 4 MiB, it took 18 MiB
  const held = inn.received + inn.stream.readBufferLength;
  assert.ok(held <= 2 * 1024 * 1024, `the receiver took ${inn.received} bytes and holds ${inn.stream.readBufferLength} more`);
  inn.abort(new Error('test done'));
});
