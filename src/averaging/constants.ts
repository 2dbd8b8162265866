/** Protocol ids, defaults and limits of the averaging layer, with units in the names. See docs/protocol.md. */

const second = 1000;
const KiB = 1024;
const MiB = 1024 * KiB;

/** Protocol suffixes under `/cohort/<run-id>/`. */
export const MATCHMAKING_PROTOCOL = 'matchmaking/5.0.0';
export const ALLREDUCE_PROTOCOL = 'allreduce/3.0.0';
export const STATE_PROTOCOL = 'state/2.0.0';

/** Record namespaces: `averaging/<prefix>:<epoch>` (group declarations), `state/<prefix>` (donors). */
export const GROUP_NAMESPACE = 'averaging';
export const STATE_NAMESPACE = 'state';

/** Averager defaults (hivemind's names in snake_case in the comments). */
export const DEFAULT_TARGET_GROUP_SIZE = 32; // target_group_size
export const DEFAULT_MIN_GROUP_SIZE = 2; // min_group_size
export const DEFAULT_MATCHMAKING_TIME_MS = 5 * second; // matchmaking_time
export const DEFAULT_AVERAGING_TIMEOUT_MS = 60 * second; // averaging_timeout (the whole all-reduce)
/** How long a declaration stays valid past the end of this peer's matchmaking (averaging_expiration). */
export const DEFAULT_AVERAGING_EXPIRATION_MS = 15 * second;
/** A reducer excludes a sender that delivered nothing for this long (sender_timeout). */
export const DEFAULT_SENDER_TIMEOUT_MS = 20 * second;
/** A sender gives up on a reducer that returned nothing for this long (reducer_timeout). */
export const DEFAULT_REDUCER_TIMEOUT_MS = 30 * second;
/** How often a peer looking for a group re-reads the declarations under its group key. */
export const DEFAULT_POLL_INTERVAL_MS = 250;
/** Declared bandwidth when the caller gives none: 100 Mbit/s in bytes/s. */
export const DEFAULT_BANDWIDTH_BYTES_PER_S = 12.5 * MiB;
/** The lowest upload cap accepted (the app's smallest setting, 1 KiB/s; rounds will mostly time out that low). */
export const MIN_UPLOAD_LIMIT_BYTES_PER_S = KiB;

/** Values per all-reduce chunk: 131072 float32 values = 512 KiB uncompressed (hivemind's chunk size). */
export const DEFAULT_CHUNK_VALUES = 128 * KiB;
/** Chunks a sender streams ahead of the averages it got back (2 MiB at the default size: above a 100 Mbit/s × 100 ms path). */
export const MAX_CHUNKS_IN_FLIGHT = 4;
/** Largest chunk anyone may ask for (values); bounds every frame. */
export const MAX_CHUNK_VALUES = 1024 * KiB;
/** Largest flattened vector (values): ALBERT-xxlarge is ~235 M; 2^30 leaves room without risking overflow. */
export const MAX_VECTOR_VALUES = 2 ** 30;
/** No reducer's part exceeds this many times an equal share of the vector, whatever bandwidth it declares. */
export const MAX_PART_SHARE_FACTOR = 2;
/** Largest group. */
export const MAX_GROUP_SIZE = 256;
/** How gradients are averaged: as they are, or PowerSGD-compressed (powersgd.ts). */
export const GRAD_AVERAGERS = ['plain', 'powersgd'] as const;
/** PowerSGD's rank and the least share of a matrix's values it must save to be compressed (hivemind's averager_rank, min_compression_ratio). */
export const DEFAULT_POWERSGD_RANK = 32;
export const DEFAULT_POWERSGD_MIN_RATIO = 0.5;
/** How reducers combine their senders' chunks unless told otherwise (see AGGREGATIONS). */
export const DEFAULT_AGGREGATION = 'centered-clip';
/** Averaged values beyond this magnitude are refused (attack or bug). */
export const DEFAULT_MAX_ABS_VALUE = 1e8;
/**
 * Poisoned parts (NaN/Inf, or values beyond maxAbs) a peer may send before this node bans it from
 * its groups for the rest of the run: one could be a glitch, three in a row are a broken or hostile peer.
 */
export const BAN_AFTER_OFFENCES = 3;

/**
 * How long a stream's first message may take: the opener's (`join`, `begin`, `get`), and a leader's
 * answer to a `join`, which an honest leader writes as soon as it reads it.
 */
export const FIRST_MESSAGE_TIMEOUT_MS = 5 * second;

/** Largest control message (join request, group description with MAX_GROUP_SIZE members). */
export const MAX_CONTROL_BYTES = 64 * KiB;
/** Largest data frame: a full chunk of fp32 values plus framing. */
export const MAX_DATA_FRAME_BYTES = 4 * MAX_CHUNK_VALUES + 4 * KiB;
/** Received-but-unread bytes per stream before the stream is paused (yamux then stops the sender). */
export const READ_HIGH_WATER_BYTES = 4 * MiB;
/** A paused stream may still receive one yamux window (≤16 MiB) before the sender stops. */
export const MAX_STREAM_READ_BUFFER_BYTES = 24 * MiB;

/** State download: chunk size, limits and timeouts. */
export const DEFAULT_STATE_CHUNK_BYTES = 512 * KiB;
export const MIN_STATE_CHUNK_BYTES = 64 * KiB;
export const MAX_STATE_CHUNK_BYTES = 1 * MiB;
/** Largest state a newcomer accepts (ALBERT-large weights + LAMB moments in fp32 are ~216 MB). */
export const DEFAULT_MAX_STATE_BYTES = 2 * 1024 * MiB;
export const MAX_STATE_METADATA_BYTES = 16 * KiB;
/** Concurrent downloads a donor serves; more are refused with BUSY so newcomers spread out. */
export const DEFAULT_MAX_CONCURRENT_DOWNLOADS = 2;
/** A download that makes no progress for this long is abandoned (next donor). */
export const DEFAULT_STATE_STALL_TIMEOUT_MS = 15 * second;
/**
 * A download averaging under this (after a stall timeout's grace) is left for the next donor, unless
 * it is the last one left: a donor sending a chunk just within the stall timeout never stalls, and
 * held a 200 MB download for hours.
 */
export const DEFAULT_STATE_MIN_BYTES_PER_S = 64 * KiB;
/** Donors re-advertise their epoch this often, with records valid for three periods. */
export const DEFAULT_STATE_ADVERTISE_INTERVAL_MS = 10 * second;
/** Donors tried at most per loadStateFromPeers call. */
export const DEFAULT_MAX_DONORS_TRIED = 8;
/**
 * A reader a server ended a transfer to for draining it under the server's floor is refused (BUSY)
 * this long: it would otherwise ask again at once and take the freed slot before any newcomer.
 */
export const SLOW_READER_REFUSED_MS = 60 * second;
