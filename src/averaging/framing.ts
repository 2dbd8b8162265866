// deadline() needs timeouts that survive garbage collection (see the polyfill)
import '../runtime/polyfills.js';
import type { Stream } from '@libp2p/interface';
import { Uint8ArrayList } from 'uint8arraylist';
import type { z } from 'zod';
import { checkMessage } from '../swarm/cbor-message.js';
import { rateFloorMs } from '../util/rate-floor.js';
import { MAX_STREAM_READ_BUFFER_BYTES, READ_HIGH_WATER_BYTES } from './constants.js';
import { ProtocolError } from './errors.js';
import { CHUNK_FRAME_TAG, CHUNK_HEADER_BYTES, chunkHeader, decodeMessage, encodeMessage } from './messages.js';
import type { UploadLimit } from './upload-limit.js';

/** Messages up to this size are copied behind their length prefix (one part on the wire); larger ones go as two parts, uncopied. */
const SMALL_MESSAGE_BYTES = 16 * 1024;

/** Frames of the stream's cap read ahead before it is paused (at most READ_HIGH_WATER_BYTES). */
const READ_AHEAD_FRAMES = 4;

/**
 * Varint-length-prefixed frames (CBOR messages, or binary chunk frames) over a libp2p stream, with backpressure both ways: writes wait
 * for `drain`, and a reader that falls behind pauses the stream (yamux then stops granting window
 * to the sender), so a fast sender never grows our memory beyond one window per stream. Every frame
 * is capped at `maxFrameBytes` before it is buffered, and every read takes an AbortSignal.
 */
export class FramedStream {
  private readonly queue: Uint8Array[] = [];
  private queued = 0;
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private paused = false;
  /** Inside `stream.resume()`, which hands us the data held while paused: see `setPaused`. */
  private resuming = false;
  /** expectTransient's buffer. */
  private joined = new Uint8Array(0);
  /** Bytes written and read, frames' headers included. */
  sent = 0;
  received = 0;
  /** Milliseconds writes waited for the remote to take more (backpressure), and since when the current wait lasts. */
  private drainWaitedMs = 0;
  private drainingSince: number | undefined;
  /** Aborted when the stream closes: a write waiting under the upload cap stops at once (a server frees the slot of a reader that left). */
  private readonly closed = new AbortController();

  constructor(
    readonly stream: Stream,
    private maxFrameBytes: number,
    private readonly what: string,
    /** Paces what this stream writes (the node's upload cap); none by default. */
    private readonly upload?: UploadLimit,
  ) {
    stream.maxReadBufferLength = MAX_STREAM_READ_BUFFER_BYTES;
    stream.addEventListener('message', (event) => {
      // a list's parts are queued as they are: subarray() would copy them into one buffer
      for (const data of event.data instanceof Uint8Array ? [event.data] : event.data) {
        this.queue.push(data);
        this.queued += data.byteLength;
        this.received += data.byteLength;
      }
      if (this.queued > this.highWater() && !this.paused && !this.resuming) this.setPaused(true);
      this.notify();
    });
    // not 'remoteCloseWrite': it comes at once, while a paused stream still holds what arrived before it
    stream.addEventListener('end', () => {
      this.ended = true;
      this.notify();
    });
    stream.addEventListener('close', (event) => {
      this.ended = true;
      // the stream object may outlive its use (libp2p keeps closed streams referenced a while): its join buffer must not
      this.joined = new Uint8Array(0);
      if (event.error !== undefined) this.failure ??= event.error;
      this.closed.abort(this.failure ?? new ProtocolError(`${this.what}: stream closed`));
      this.notify();
    });
  }

  /** Sends one message; resolves once the stream can take more (backpressure). */
  async write(message: unknown, signal?: AbortSignal): Promise<void> {
    const body = encodeMessage(message);
    const length = encodeVarint(body.byteLength);
    if (body.byteLength > SMALL_MESSAGE_BYTES) return this.send(new Uint8ArrayList(length, body), signal);
    // a small message goes as one part: every part becomes a write (and a TLS record) further down
    const frame = new Uint8Array(length.byteLength + body.byteLength);
    frame.set(length);
    frame.set(body, length.byteLength);
    await this.send(new Uint8ArrayList(frame), signal);
  }

  /**
   * Sends chunk `i` as a binary frame (messages.ts, CHUNK_FRAME_TAG): `payload` is handed to the
   * muxer as it is, so the caller must not change it until the stream is closed. Read back by
   * `read` as `{ t: 'chunk', i, d }`.
   */
  async writeChunk(i: number, payload: Uint8Array, signal?: AbortSignal): Promise<void> {
    const header = chunkHeader(i);
    const length = encodeVarint(header.byteLength + payload.byteLength);
    // length and header in one part: every part becomes a write (and a TLS record) further down
    const prefix = new Uint8Array(length.byteLength + header.byteLength);
    prefix.set(length);
    prefix.set(header, length.byteLength);
    await this.send(new Uint8ArrayList(prefix, payload), signal);
  }

  /** One muxer write for the whole frame (a list of its parts, none copied): one yamux frame and one drain check instead of one per part. */
  private async send(frame: Uint8ArrayList, signal: AbortSignal | undefined): Promise<void> {
    if (this.upload !== undefined) await this.upload.take(frame.byteLength, signal === undefined ? this.closed.signal : AbortSignal.any([signal, this.closed.signal]));
    this.sent += frame.byteLength;
    if (!this.stream.send(frame)) await this.waitForReader(() => drained(this.stream, signal, this.what));
  }

  /**
   * Waits until the remote has taken everything written but its receive window, each drain within
   * `stallMs`: a close waits for the whole write queue (up to WRITE_QUEUE_BYTES) under one deadline,
   * and outside readerWaitMs.
   */
  async flush(stallMs: number, signal?: AbortSignal): Promise<void> {
    await this.waitForReader(async () => {
      while (this.stream.writableNeedsDrain && this.stream.writeBufferLength > 0) await nextDrain(this.stream, deadline(stallMs, signal), this.what);
    });
  }

  private async waitForReader(wait: () => Promise<void>): Promise<void> {
    this.drainingSince = performance.now();
    try {
      await wait();
    } finally {
      this.drainWaitedMs += performance.now() - this.drainingSince;
      this.drainingSince = undefined;
    }
  }

  /** Milliseconds this stream's writes have waited for its reader to take more: the reader's pace, not the upload cap's (paid before a write). */
  readerWaitMs(): number {
    return this.drainWaitedMs + (this.drainingSince === undefined ? 0 : performance.now() - this.drainingSince);
  }

  /** The next message, validated by `schema`; `null` when the remote closed cleanly between frames. */
  async read<T>(schema: z.ZodType<T>, signal: AbortSignal): Promise<T | null> {
    const frame = await this.nextFrame(signal);
    return frame === null ? null : decodeMessage(schema, frame.subarray(), this.what);
  }

  /**
   * Like `expect`, but a frame that arrived in several parts is joined in a buffer this stream
   * reuses instead of a new one: the message's byte fields are valid only until the next read. For
   * a reader that decodes each chunk at once (the all-reduce's 512 KiB chunks always span several
   * muxer frames: a fresh buffer each would be garbage).
   */
  async expectTransient<T>(schema: z.ZodType<T>, signal: AbortSignal, expected: string): Promise<T> {
    const frame = await this.nextFrame(signal);
    if (frame === null) throw new ProtocolError(`${this.what}: stream closed before ${expected}`);
    const parts = [...frame];
    if (parts.length <= 1) return decodeMessage(schema, frame.subarray(), this.what);
    if (this.joined.byteLength < frame.byteLength) this.joined = new Uint8Array(frame.byteLength);
    let at = 0;
    for (const part of parts) {
      this.joined.set(part, at);
      at += part.byteLength;
    }
    return decodeMessage(schema, this.joined.subarray(0, at), this.what);
  }

  /**
   * Like `expect` for a binary chunk frame, without joining its payload: `schema` sees
   * `{ t: 'chunk', i, d }` with `d` a Uint8ArrayList of views of the received buffers (a reader that
   * copies the bytes where they belong, or hashes them, copies them once). Any other frame is decoded
   * and checked against `schema` as `read` does.
   */
  async expectChunk<T>(schema: z.ZodType<T>, signal: AbortSignal, expected: string): Promise<T> {
    const frame = await this.nextFrame(signal);
    if (frame === null) throw new ProtocolError(`${this.what}: stream closed before ${expected}`);
    if (frame.byteLength < CHUNK_HEADER_BYTES || frame.get(0) !== CHUNK_FRAME_TAG) return decodeMessage(schema, frame.subarray(), this.what);
    const fail = (message: string): ProtocolError => new ProtocolError(message);
    return checkMessage(schema, { t: 'chunk', i: frame.getUint32(1), d: frame.sublist(CHUNK_HEADER_BYTES) }, this.what, fail);
  }

  /** The next frame's body as the parts it arrived in; `null` when the remote closed cleanly between frames. */
  private async nextFrame(signal: AbortSignal): Promise<Uint8ArrayList | null> {
    for (;;) {
      const frame = this.takeFrame();
      if (frame !== undefined) {
        if (this.paused && this.queued < this.highWater() / 2) this.setPaused(false);
        return frame;
      }
      // a frame larger than the high-water mark must not wait behind our own pause
      if (this.paused) this.setPaused(false);
      if (this.failure !== undefined) throw this.failure;
      if (this.ended) {
        if (this.queued === 0) return null;
        throw new ProtocolError(`${this.what}: stream ended inside a frame (${this.queued} bytes left)`);
      }
      signal.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => reject(signal.reason as Error);
        signal.addEventListener('abort', onAbort, { once: true });
        this.wake = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
      });
    }
  }

  /** Like `read`, but a clean end of stream is an error: the protocol expected `expected`. */
  async expect<T>(schema: z.ZodType<T>, signal: AbortSignal, expected: string): Promise<T> {
    const message = await this.read(schema, signal);
    if (message === null) throw new ProtocolError(`${this.what}: stream closed before ${expected}`);
    return message;
  }

  /** Closes our writing side gracefully, or aborts the stream if that fails. */
  async close(signal?: AbortSignal): Promise<void> {
    try {
      await this.stream.close(signal ? { signal } : {});
    } catch (err) {
      this.stream.abort(err as Error);
    }
  }

  abort(err: Error): void {
    this.stream.abort(err);
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Raises or lowers the frame cap for the frames read from here on (a stream whose first message is a small one). */
  limitFrames(maxFrameBytes: number): void {
    this.maxFrameBytes = maxFrameBytes;
  }

  /**
   * Unread bytes past which the stream is paused: a few frames ahead, so a stream of small frames (a
   * control stream before limitFrames, shard requests) holds no more junk than that past what its reader
   * took; a data stream's (MB frames) is READ_HIGH_WATER_BYTES.
   */
  private highWater(): number {
    return Math.min(READ_HIGH_WATER_BYTES, READ_AHEAD_FRAMES * this.maxFrameBytes);
  }

  private setPaused(paused: boolean): void {
    if (this.stream.status !== 'open') return;
    this.paused = paused;
    if (paused) return this.stream.pause();
    // resume() dispatches what was held while paused before it re-enables yamux's window updates: a
    // pause from inside it would be undone (libp2p holding data as paused, yamux granting window all
    // the same, until the read buffer's limit aborts the stream), so the pause comes after it
    this.resuming = true;
    try {
      this.stream.resume();
    } finally {
      this.resuming = false;
    }
    // not when the remote's end was dispatched: pause() throws on a closed readable end
    if (this.queued > this.highWater() && this.stream.readStatus === 'readable') this.setPaused(true);
  }

  /** Removes and returns one complete frame's body, or undefined when it has not fully arrived. */
  private takeFrame(): Uint8ArrayList | undefined {
    const head = this.peek(10);
    let length = 0;
    let headerBytes: number;
    for (let i = 0; ; i++) {
      if (i >= head.byteLength) {
        if (head.byteLength >= 10) throw new ProtocolError(`${this.what}: frame length prefix is not a valid varint`);
        return undefined;
      }
      length += (head[i]! & 0x7f) * 2 ** (7 * i);
      if ((head[i]! & 0x80) === 0) {
        headerBytes = i + 1;
        break;
      }
    }
    if (length > this.maxFrameBytes) throw new ProtocolError(`${this.what}: frame of ${length} bytes exceeds the limit of ${this.maxFrameBytes}`);
    if (this.queued < headerBytes + length) return undefined;
    this.drop(headerBytes);
    return this.consume(length);
  }

  private peek(n: number): Uint8Array {
    if (this.queue.length > 0 && this.queue[0]!.byteLength >= n) return this.queue[0]!.subarray(0, n);
    const out = new Uint8Array(Math.min(n, this.queued));
    let at = 0;
    for (const part of this.queue) {
      if (at >= out.byteLength) break;
      const take = part.subarray(0, out.byteLength - at);
      out.set(take, at);
      at += take.byteLength;
    }
    return out;
  }

  /** Removes the next `n` queued bytes (a length prefix, within the first few parts). */
  private drop(n: number): void {
    this.queued -= n;
    for (let left = n; left > 0; ) {
      const part = this.queue[0]!;
      if (part.byteLength <= left) {
        left -= part.byteLength;
        this.queue.shift();
      } else {
        this.queue[0] = part.subarray(left);
        left = 0;
      }
    }
  }

  /** Removes the next `n` queued bytes and returns them as views of the received buffers (no copy). */
  private consume(n: number): Uint8ArrayList {
    this.queued -= n;
    const out = new Uint8ArrayList();
    while (out.byteLength < n) {
      const part = this.queue[0]!;
      const take = Math.min(part.byteLength, n - out.byteLength);
      out.append(take === part.byteLength ? part : part.subarray(0, take));
      if (take === part.byteLength) this.queue.shift();
      else this.queue[0] = part.subarray(take);
    }
    return out;
  }
}

function encodeVarint(value: number): Uint8Array {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Uint8Array.from(out);
}

/** An AbortSignal that fires on the first of `signals` or after `ms` (if given). */
export function deadline(ms: number | undefined, ...signals: Array<AbortSignal | undefined>): AbortSignal {
  const all = signals.filter((s): s is AbortSignal => s !== undefined);
  if (ms !== undefined) all.push(AbortSignal.timeout(Math.max(0, ms)));
  return all.length === 1 ? all[0]! : AbortSignal.any(all);
}

/**
 * Like `deadline`, but `release()` clears the timer and unhooks `signal` at once. For a deadline
 * whose listeners hold large buffers (an all-reduce round): a timeout signal stays referenced until
 * it fires (see the polyfill), so a round that ended early would keep its vectors for the whole
 * timeout. `refresh()` starts the `ms` again: a stall deadline pushed back by each step of progress,
 * one timer for a whole transfer.
 */
export function releasableDeadline(ms: number, signal?: AbortSignal): { readonly signal: AbortSignal; release(): void; refresh(): void } {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(signal!.reason);
  const timer = setTimeout(() => controller.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError')), Math.max(0, ms));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
    refresh: () => void timer.refresh(),
  };
}

/**
 * Fires once `framed`'s writes have waited for its reader for more than `ms` in all from now. Time
 * spent under this side's own upload cap does not count, so a capped server never ends its own
 * transfers. The timer is set again for the budget left each time it finds the reader has not used it all.
 */
function readerDeadline(framed: FramedStream, ms: number): { readonly signal: AbortSignal; release(): void } {
  const controller = new AbortController();
  const from = framed.readerWaitMs();
  let timer: NodeJS.Timeout;
  const check = (): void => {
    const left = ms - (framed.readerWaitMs() - from);
    if (left > 0) timer = setTimeout(check, Math.max(left, 10));
    else controller.abort(new DOMException(`the reader kept this side waiting over ${Math.round(ms)} ms`, 'TimeoutError'));
  };
  timer = setTimeout(check, Math.max(0, ms));
  return { signal: controller.signal, release: () => clearTimeout(timer) };
}

/** A transfer's floor: see `minRateDeadline`. */
export interface MinRateDeadline {
  /** Fires once the transfer has had its time (never with a rate of 0). */
  readonly signal: AbortSignal;
  /**
   * `step` (a read or write of the transfer, under a signal that includes `signal`), its rejection
   * replaced by `tooSlow`'s error when this deadline caused it and `cancel` (the caller's own abort) did not fire.
   */
  guard<T>(step: Promise<T>, cancel?: AbortSignal): Promise<T>;
  release(): void;
}

/**
 * The floor of a transfer of `bytes` that must average `minBytesPerSecond`: it is allowed a stall
 * timeout plus its bytes at that rate, beside the stall deadline (a peer sending or taking a chunk just
 * within the stall timeout never stalls, and would hold the transfer for ever). A receiver counts all
 * time; a server counts only the time its writes to `reader` waited for the remote to read
 * (`readerDeadline`). `tooSlow(allowedMs)` builds the error a transfer that had its time ends with.
 */
export function minRateDeadline(
  floor: { readonly stallMs: number; readonly bytes: number; readonly minBytesPerSecond: number; readonly reader?: FramedStream },
  tooSlow: (allowedMs: number) => Error,
): MinRateDeadline {
  if (floor.minBytesPerSecond <= 0) return { signal: new AbortController().signal, guard: (step) => step, release: () => undefined };
  const allowedMs = rateFloorMs(floor.bytes, floor.stallMs, floor.minBytesPerSecond);
  const timer = floor.reader === undefined ? releasableDeadline(allowedMs) : readerDeadline(floor.reader, allowedMs);
  return {
    signal: timer.signal,
    guard: (step, cancel) =>
      step.catch((err: unknown) => {
        if (!timer.signal.aborted || cancel?.aborted) throw err;
        throw tooSlow(allowedMs);
      }),
    release: () => timer.release(),
  };
}

/**
 * Bytes a writer may leave queued on a stream beyond what its muxer took before it waits for a drain:
 * a queue that is never empty when the muxer drains keeps the pipe full (waiting until every drain
 * emptied it cost a single stream 40 % of its throughput: bench dht, 0.43–0.52 → 0.24–0.28 of raw TCP),
 * and a bounded one keeps a reader that stops reading from growing the writer's memory.
 */
const WRITE_QUEUE_BYTES = 4 * 1024 * 1024;

/**
 * After a `send` that returned false: waits until `stream` has taken its queue down to
 * WRITE_QUEUE_BYTES (a close ends the wait with an error naming `what`). Not `stream.onDrain()`:
 * @libp2p/utils 7.4 keeps the promise it resolved at the first drain and hands it back ever after, so
 * every later wait returned at once and a reader that stopped reading grew the writer's buffer
 * without bound.
 */
export async function drained(stream: Stream, signal: AbortSignal | undefined, what: string): Promise<void> {
  while (stream.writableNeedsDrain && stream.writeBufferLength > WRITE_QUEUE_BYTES) await nextDrain(stream, signal, what);
}

function nextDrain(stream: Stream, signal: AbortSignal | undefined, what: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error): void => {
      stream.removeEventListener('drain', onDrain);
      stream.removeEventListener('close', onClose);
      signal?.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onDrain = (): void => done();
    const onClose = (event: Event): void => done((event as Event & { error?: Error }).error ?? new ProtocolError(`${what}: stream closed while a write waited for the reader`));
    const onAbort = (): void => done(signal!.reason as Error);
    if (signal?.aborted) return onAbort();
    stream.addEventListener('drain', onDrain);
    stream.addEventListener('close', onClose);
    signal?.addEventListener('abort', onAbort);
  });
}
