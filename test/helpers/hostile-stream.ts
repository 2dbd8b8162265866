import type { Stream } from '@libp2p/interface';

/**
 * Sends what a hostile peer would to make a handler buffer a frame: a length prefix claiming `length`
 * bytes, then all but the last of them. Resolves once the stream took them all or closed.
 */
export async function sendAllButLastByte(stream: Stream, length: number): Promise<void> {
  const prefix: number[] = [];
  for (let v = length; v > 0x7f; v = Math.floor(v / 128)) prefix.push((v & 0x7f) | 0x80);
  prefix.push(Math.floor(length / 128 ** prefix.length));
  const settled = new Promise<void>((resolve) => {
    stream.addEventListener('drain', () => resolve(), { once: true });
    stream.addEventListener('close', () => resolve(), { once: true });
  });
  if (stream.send(Uint8Array.from(prefix)) && stream.send(new Uint8Array(length - 1).fill(7))) throw new Error(`the stream took ${length} bytes without waiting`);
  await settled;
}
