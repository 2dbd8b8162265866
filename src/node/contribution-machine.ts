import type { ContributionPhase, ContributionStatus } from '../shared/api.js';
import type { HaltCause } from '../training/events.js';

/** Why training stopped by itself (the memory limit, an error); the volunteer's Start clears it. */
export interface StopReason {
  readonly cause: HaltCause;
  readonly reason: string;
}

/** What the volunteer asked for; a policy hold never changes it, so a user pause stays paused. */
export type Intent = 'never-started' | 'contribute' | 'paused';

export interface ContributionInput {
  readonly intent: Intent;
  /** Why a policy (battery, machine in use) holds contribution; undefined = no hold. */
  readonly hold: string | undefined;
  /** What limits a running node in this version (e.g. no engine yet); undefined = nothing. */
  readonly limitation: string | undefined;
  /** Why training stopped itself, when it did; the volunteer's Start clears it. */
  readonly stopped?: StopReason | undefined;
}

/** A running node's detail when nothing more is to be said (no limitation, with a swarm). */
export const CONTRIBUTING_DETAIL = 'contributing';

/** The phase the volunteer sees, from their intent and the policies. Pure, so every transition is testable. */
export function contributionPhase(input: ContributionInput): { phase: ContributionPhase; detail: string } {
  switch (input.intent) {
    case 'never-started':
      return { phase: 'stopped', detail: 'not started yet: press Start to contribute' };
    case 'paused':
      if (input.stopped?.cause === 'memory') return { phase: 'halted', detail: `halted: memory limit — ${input.stopped.reason}` };
      if (input.stopped?.cause === 'error') return { phase: 'error', detail: `error: ${input.stopped.reason}` };
      return { phase: 'paused', detail: 'paused by you: stays paused until you resume' };
    case 'contribute':
      if (input.hold !== undefined) return { phase: 'waiting', detail: `waiting: ${input.hold}` };
      return { phase: 'running', detail: input.limitation ?? CONTRIBUTING_DETAIL };
  }
}

/** Tracks the phase and when it last changed. */
export class ContributionMachine {
  private input: ContributionInput;
  private current: ContributionStatus;

  constructor(intent: Intent, limitation: string | undefined, now = Date.now(), stopped?: StopReason) {
    this.input = { intent, hold: undefined, limitation, stopped };
    this.current = { ...contributionPhase(this.input), since: now };
  }

  get status(): ContributionStatus {
    return this.current;
  }

  get intent(): Intent {
    return this.input.intent;
  }

  /** Applies a change; returns true when the visible phase or detail changed. */
  update(change: Partial<ContributionInput>, now = Date.now()): boolean {
    this.input = { ...this.input, ...change };
    const next = contributionPhase(this.input);
    if (next.phase === this.current.phase && next.detail === this.current.detail) return false;
    this.current = { ...next, since: next.phase === this.current.phase ? this.current.since : now };
    return true;
  }
}
