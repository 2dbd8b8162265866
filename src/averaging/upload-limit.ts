import { TokenBucket } from 'limiter';
import { raceSignal } from 'race-signal';

/**
 * The volunteer's upload cap for everything the averaging layer sends (all-reduce parts, averaged
 * chunks, state downloads), shared by every stream of one node. A token bucket holding one second
 * of traffic: short bursts pass, the long-run rate stays at the cap.
 */
export class UploadLimit {
  private readonly bucket: TokenBucket;

  constructor(readonly bytesPerSecond: number) {
    if (!(Number.isFinite(bytesPerSecond) && bytesPerSecond > 0)) throw new RangeError(`upload limit ${bytesPerSecond} B/s must be a positive number`);
    this.bucket = new TokenBucket({ bucketSize: bytesPerSecond, tokensPerInterval: bytesPerSecond, interval: 'second' });
  }

  /** Waits until `bytes` may be sent (a frame larger than the bucket is taken in bucket-sized pieces). */
  async take(bytes: number, signal?: AbortSignal): Promise<void> {
    for (let left = bytes; left > 0; left -= this.bytesPerSecond) {
      signal?.throwIfAborted();
      // the bucket's own wait cannot be cancelled: stop waiting for it instead
      await raceSignal(this.bucket.removeTokens(Math.min(left, this.bytesPerSecond)), signal);
    }
  }
}
