import type { Database } from 'better-sqlite3';

export interface SeenPeer {
  readonly peerId: string;
  readonly addrs: string[];
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly info: Record<string, unknown>;
}

/**
 * Most peers the table keeps, the most recently seen: identities are free, so every peer that ever
 * connected (a node runs for weeks, a hostile one can connect under a new id each time) would grow it.
 */
export const PEERS_KEPT = 1000;

/** Peers this node has met, so the UI can show when each was last seen. */
export class PeerStore {
  constructor(private readonly db: Database) {}

  seen(peerId: string, addrs: readonly string[], info: Record<string, unknown> = {}, at = Date.now()): void {
    this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO peers (peer_id, addrs, first_seen, last_seen, info) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (peer_id) DO UPDATE SET addrs = excluded.addrs, last_seen = max(last_seen, excluded.last_seen), info = json_patch(info, excluded.info)`,
        )
        .run(peerId, JSON.stringify(addrs), at, at, JSON.stringify(info));
      this.forgetOldest();
    })();
  }

  /** Keeps the PEERS_KEPT most recently seen. */
  private forgetOldest(): void {
    this.db.prepare('DELETE FROM peers WHERE peer_id NOT IN (SELECT peer_id FROM peers ORDER BY last_seen DESC, peer_id LIMIT ?)').run(PEERS_KEPT);
  }

  /** The last connection to a known peer closed: it was seen until now. */
  lastConnected(peerId: string, at = Date.now()): void {
    this.db.prepare('UPDATE peers SET last_seen = max(last_seen, ?) WHERE peer_id = ?').run(at, peerId);
  }

  /**
   * Peers whose progress records this node read: each one's throughput (from its newest record; one
   * read late changes nothing), seen when it measured it. Addresses are identify's (`seen`).
   */
  reported(reports: ReadonlyArray<{ readonly peerId: string; readonly samplesPerSecond: number; readonly time: number }>): void {
    const upsert = this.db.prepare(
      `INSERT INTO peers (peer_id, addrs, first_seen, last_seen, info) VALUES (?, '[]', ?, ?, json_object('samplesPerSecond', ?, 'reportedAt', ?))
       ON CONFLICT (peer_id) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen),
         info = CASE WHEN coalesce(json_extract(info, '$.reportedAt'), 0) <= excluded.last_seen THEN json_patch(info, excluded.info) ELSE info END`,
    );
    this.db.transaction(() => {
      for (const r of reports) upsert.run(r.peerId, r.time, r.time, r.samplesPerSecond, r.time);
      this.forgetOldest();
    })();
  }

  /** Most recently seen first. */
  list(limit = PEERS_KEPT): SeenPeer[] {
    const rows = this.db.prepare('SELECT * FROM peers ORDER BY last_seen DESC LIMIT ?').all(limit) as Array<{ peer_id: string; addrs: string; first_seen: number; last_seen: number; info: string }>;
    return rows.map((r) => ({ peerId: r.peer_id, addrs: JSON.parse(r.addrs) as string[], firstSeen: r.first_seen, lastSeen: r.last_seen, info: JSON.parse(r.info) as Record<string, unknown> }));
  }
}
