/**
 * Reading the contributions a coordinator credited (its signed leaderboard record on the swarm's
 * DHT): `cohort status` prints them and the dashboard shows them.
 */
import type { SwarmNode } from '../swarm/index.js';
import { LEADERBOARD_NAMESPACE, leaderboardRecords, type LeaderboardRecord } from './records.js';

/** The newest leaderboard any coordinator published, or undefined when none is found. */
export async function latestLeaderboard(node: SwarmNode): Promise<LeaderboardRecord | undefined> {
  const boards = [...(await leaderboardRecords(node).get(LEADERBOARD_NAMESPACE)).values()];
  return boards.sort((a, b) => b.value.time - a.value.time)[0]?.value;
}
