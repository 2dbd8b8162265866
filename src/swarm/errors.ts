/** Named errors of the swarm layer, so callers and tests can tell them apart by class. */

/** A join code could not be decoded; the message says which part is wrong. */
export class JoinCodeError extends Error {
  override readonly name = 'JoinCodeError';
}

/** A record was refused (locally before sending, or by every replica); `reason` is a stable code. */
export class RecordError extends Error {
  override readonly name = 'RecordError';
  constructor(
    readonly reason: RejectReason,
    message: string,
  ) {
    super(message);
  }
}

/** Why a record or message was refused; counted per reason in `stats().records.rejected`. */
export type RejectReason =
  | 'malformed'
  | 'bad-signature'
  | 'wrong-run'
  | 'expired'
  | 'ttl-too-long'
  | 'key-too-long'
  | 'subkey-too-long'
  | 'value-too-large'
  | 'key-full'
  | 'store-full'
  | 'owner-full'
  | 'source-full'
  | 'unknown-namespace'
  | 'schema'
  | 'not-newer'
  | 'rate-limited';

/** The identity key file or stored identity is unreadable. */
export class IdentityError extends Error {
  override readonly name = 'IdentityError';
}

/** None of a join code's peers answered: the swarm cannot be read (its log lines say what each address answered). */
export class SwarmUnreachableError extends Error {
  override readonly name = 'SwarmUnreachableError';
}

/** The node could not listen on a configured address (a port another program holds, an address not of this machine). */
export class SwarmListenError extends Error {
  override readonly name = 'SwarmListenError';
}
