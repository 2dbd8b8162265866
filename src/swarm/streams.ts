import type { AbortOptions, Libp2p, PeerId, Stream } from '@libp2p/interface';
import { byteStream, lpStream } from '@libp2p/utils';

/**
 * Reads a stream until the remote closes its writing side, at most `maxBytes`. Use this (or
 * `lpStream`/`byteStream` from @libp2p/utils) rather than `for await (… of stream)`: in libp2p 3.x
 * that iterator misses the end when the remote closed before iteration began, and hangs.
 */
export async function readToEnd(stream: Stream, options: AbortOptions & { maxBytes: number }): Promise<Uint8Array> {
  const bytes = byteStream(stream, { maxBufferSize: options.maxBytes });
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const chunk = await bytes.read(options.signal ? { signal: options.signal } : {});
    if (chunk === null) break;
    total += chunk.byteLength;
    if (total > options.maxBytes) {
      const err = new RangeError(`stream ${stream.protocol ?? ''} sent more than ${options.maxBytes} bytes`);
      stream.abort(err);
      throw err;
    }
    chunks.push(chunk.subarray());
  }
  return Buffer.concat(chunks);
}

/** Bounds of one request–answer exchange: each message's size, and the whole exchange's time. */
export interface ExchangeOptions {
  readonly maxBytes: number;
  readonly signal: AbortSignal;
}

/**
 * Sends `request` on a new stream of `protocol` to `peer` and reads its one answer, each a
 * length-prefixed message of at most `maxBytes`; `decode` reads the answer. The stream is closed
 * after, and reset on any failure (a timeout, an oversized or undecodable answer), which is thrown.
 */
export async function requestOnce<T>(libp2p: Pick<Libp2p, 'dialProtocol'>, peer: PeerId, protocol: string, request: Uint8Array, decode: (bytes: Uint8Array) => T, { maxBytes, signal }: ExchangeOptions): Promise<T> {
  const stream = await libp2p.dialProtocol(peer, protocol, { signal });
  try {
    const lp = lpStream(stream, { maxDataLength: maxBytes });
    await lp.write(request, { signal });
    const answer = decode((await lp.read({ signal })).subarray());
    await stream.close({ signal });
    return answer;
  } catch (err) {
    stream.abort(err as Error);
    throw err;
  }
}

/**
 * requestOnce's other side: reads the one request on `stream`, writes what `answer` makes of it and
 * closes the stream. Throws on a timeout or an oversized request: the caller resets the stream.
 */
export async function answerOnce(stream: Stream, answer: (request: Uint8Array) => Promise<Uint8Array>, { maxBytes, signal }: ExchangeOptions): Promise<void> {
  const lp = lpStream(stream, { maxDataLength: maxBytes });
  const reply = await answer((await lp.read({ signal })).subarray());
  await lp.write(reply, { signal });
  await stream.close({ signal });
}
