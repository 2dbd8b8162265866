/** A failed shard transfer or a peer that broke the shard protocol; the message names the peer and the shard. */
export class ShardExchangeError extends Error {
  override readonly name = 'ShardExchangeError';
}
