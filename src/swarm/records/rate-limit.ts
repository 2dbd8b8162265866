/**
 * Token bucket per remote peer: `capacity` requests at once, refilled at `perSecond`. No timers, so
 * nothing keeps the process alive; idle buckets are dropped when the map grows large.
 */
export class PeerRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly capacity: number,
    private readonly perSecond: number,
    private readonly maxPeers = 10_000,
  ) {}

  take(peer: string, now = Date.now()): boolean {
    const bucket = this.buckets.get(peer) ?? { tokens: this.capacity, at: now };
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (!this.buckets.has(peer)) {
      if (this.buckets.size >= this.maxPeers) this.dropFull();
      this.buckets.set(peer, bucket);
    }
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  private dropFull(): void {
    // A full bucket carries no information: forgetting it changes nothing.
    for (const [peer, b] of this.buckets) if (b.tokens >= this.capacity - 1) this.buckets.delete(peer);
  }
}
