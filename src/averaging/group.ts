import { createHash } from 'node:crypto';
import type { Compression } from './compression.js';
import { partRanges, partSizes } from './load-balancing.js';
import type { GroupWire, Member } from './messages.js';

/** A closed group as every member sees it: who averages, in which order, and who reduces what. */
export interface GroupInfo {
  readonly id: string;
  readonly key: string;
  readonly schema: string;
  readonly compression: Compression;
  /** Values in the flattened vector. */
  readonly size: number;
  readonly chunkValues: number;
  readonly members: readonly Member[];
  /** [start, end) of the part member i reduces (empty for client-mode peers). */
  readonly parts: ReadonlyArray<readonly [number, number]>;
}

export function groupInfo(wire: GroupWire): GroupInfo {
  const ids = new Set(wire.members.map((m) => m.peer));
  if (ids.size !== wire.members.length) throw new RangeError(`group ${wire.id} lists a peer twice`);
  const sizes = partSizes(wire.size, wire.members.map((m) => ({ peerId: m.peer, bandwidth: m.bandwidth, clientMode: m.clientMode })));
  return { ...wire, parts: partRanges(sizes) };
}

/**
 * The all-reduce of phase `phase` of a multi-phase round (PowerSGD's P, then Q) with the members of
 * `group`, found once by matchmaking (or those of them in `members`: a phase retried without the
 * members that left): its own round id (so a late stream of one phase never lands in another's
 * session) and part sizes for its own vector, by the same rule as the group's.
 */
export function phaseGroup(group: GroupInfo, phase: string, size: number, members: readonly Member[] = group.members): GroupInfo {
  const id = createHash('sha256').update(`${group.id}/phase/${phase}`).digest('hex').slice(0, 32);
  return regroup(group, { id, size, members });
}

/** `group` with another id, size or members; parts by the same rule as the group's. */
export function regroup(group: GroupInfo, change: { readonly id?: string; readonly size?: number; readonly members: readonly Member[] }): GroupInfo {
  const { parts: _parts, ...wire } = group;
  return groupInfo({ ...wire, ...change, members: [...change.members] });
}

/**
 * Hex SHA-256 of what must match for two peers to average: the tensor layout (names and sizes in
 * order) or, for a bare vector, its length. Peers with different hashes are refused (BAD_SCHEMA_HASH).
 */
export function schemaHash(layout: number | ReadonlyArray<readonly [string, number]>): string {
  const text = typeof layout === 'number' ? `flat:${layout}` : layout.map(([name, size]) => `${name}:${size}`).join('\n');
  return createHash('sha256').update(text).digest('hex');
}

/** The record key peers of one averager prefix and epoch declare under. */
export function groupKey(namespace: string, prefix: string, epoch: number): string {
  return `${namespace}/${prefix}:${epoch}`;
}
