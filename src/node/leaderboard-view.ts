import type { ContributorRow, MyContribution } from '../shared/api.js';
import type { FoundLeaderboard } from '../training/service.js';

/**
 * "My contribution" with a coordinator's leaderboard: its top contributors, and this volunteer's
 * share and rank as the coordinator credited them (its verified view of the whole run) when it lists
 * `selfName` (the volunteer's display name, else this node's peer id, as the coordinator names rows).
 * Without a leaderboard, or when it does not list this volunteer, share and rank stay this node's own.
 */
export function withLeaderboard(mine: Omit<MyContribution, 'leaderboard'>, board: FoundLeaderboard | null, selfName: string | null): MyContribution {
  if (!board) return { ...mine, leaderboard: null };
  const rows: ContributorRow[] = board.rows.map((r) => ({ name: r.name, samples: r.samples, computeHours: r.computeHours ?? null, share: r.share, rank: r.rank, me: selfName !== null && r.name === selfName }));
  const me = rows.find((r) => r.me);
  return {
    ...mine,
    ...(me ? { share: me.share, rank: me.rank } : {}),
    contributors: Math.max(mine.contributors, rows.length),
    leaderboard: { rows, updatedAt: board.time },
  };
}
