import type { AbortOptions, Stream } from '@libp2p/interface';
import { byteStream } from '@libp2p/utils';

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
