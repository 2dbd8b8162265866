/** Named errors and refusal codes of the averaging layer, so callers and tests can tell them apart. */

/** Why a leader refused a join request; sent on the wire and shown to the user. */
export const JOIN_REFUSALS = [
  'GROUP_IS_FULL',
  'NOT_A_LEADER',
  'NOT_LOOKING_FOR_GROUP',
  'ALREADY_RUNNING',
  'BAD_SCHEMA_HASH',
  /** The joiner trains on another dataset or tokenizer (the message names both). */
  'DATA_MISMATCH',
  'EPOCH_MISMATCH',
  'BAD_REQUEST',
  'NOT_ENOUGH_PEERS',
  'NOT_READY',
  'CANCELLED',
] as const;
export type JoinRefusal = (typeof JOIN_REFUSALS)[number];

/** Why a reducer refused or dropped a sender. */
export const ALLREDUCE_REFUSALS = ['UNKNOWN_GROUP', 'NOT_A_MEMBER', 'NOT_A_REDUCER', 'BAD_BEGIN', 'EXCLUDED'] as const;

/** Why a donor refused a state download. */
export const STATE_REFUSALS = ['BUSY', 'NO_STATE', 'BAD_REQUEST', 'FAILED'] as const;

/** No group could be formed; `message` says what was seen (peers, key, time). */
export class MatchmakingError extends Error {
  override readonly name = 'MatchmakingError';
  constructor(
    readonly code: JoinRefusal | 'NO_GROUP' | 'TIMEOUT',
    message: string,
    /** No other peer declared under the key: a peer alone in its swarm, expected rather than a fault. */
    readonly alone = false,
  ) {
    super(message);
  }
}

/** A state download failed at every donor tried; `attempts` says why per donor. */
export class StateDownloadError extends Error {
  override readonly name = 'StateDownloadError';
  constructor(
    message: string,
    readonly attempts: ReadonlyArray<{ readonly peer: string; readonly error: string }>,
  ) {
    super(message);
  }
}

/** A protocol rule was broken by the remote peer (bad message, wrong length, checksum mismatch). */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}
