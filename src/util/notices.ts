import type { Notice, NoticeKind } from '../shared/api.js';

/** What the dashboard says of a notice of each kind: what it means and what to do (the log names each peer). */
export const OTHER_RELEASE_NOTICE = {
  kind: 'other-release',
  text: "Some peers of this swarm run another Cohort release, and this node cannot train with them. If your Cohort is older than theirs, update it (the app updates itself on restart); the log names the peers.",
} as const satisfies Omit<Notice, 'at'>;
export const OTHER_SCHEMA_NOTICE = {
  kind: 'other-schema',
  text: "Some peers of this swarm train another model or use other averaging settings (often another Cohort release), so this node does not average with them. If your Cohort is older than theirs, update it; the log names the peers.",
} as const satisfies Omit<Notice, 'at'>;

/**
 * What a node already told its volunteer (a peer of another release, another schema): each notice
 * once for the node's life, not once a round or a connection. At most `max` are remembered, the
 * oldest forgotten first, so a swarm of thousands of such peers cannot grow it without bound. Those
 * given with a dashboard notice are also shown there, one per kind (the newest).
 */
export class Notices {
  private readonly told = new Set<string>();
  private readonly dashboard = new Map<NoticeKind, Notice>();

  constructor(private readonly max = 4096) {}

  /** Whether `notice` was given (and is still remembered). */
  has(notice: string): boolean {
    return this.told.has(notice);
  }

  /** Whether `notice` is new (and from now on remembered); when it is, `shown` goes on the dashboard. */
  first(notice: string, shown?: Omit<Notice, 'at'>): boolean {
    if (this.told.has(notice)) return false;
    if (this.told.size >= this.max) this.told.delete(this.told.values().next().value!);
    this.told.add(notice);
    if (shown) this.dashboard.set(shown.kind, { ...shown, at: Date.now() });
    return true;
  }

  /** The dashboard's notices, oldest first. */
  shown(): readonly Notice[] {
    return [...this.dashboard.values()].sort((a, b) => a.at - b.at);
  }
}
