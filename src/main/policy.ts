import type { Policies } from '../shared/api.js';

/** Input this recent (seconds) means someone is using the computer. */
export const IN_USE_BELOW_SECONDS = 10;
/** A change of power source must last this long before it counts, so unplugging briefly does not flap. */
export const POWER_SETTLE_MS = 30_000;

export interface MachineState {
  readonly onBattery: boolean;
  /** Seconds since the last keyboard or mouse input (Electron's powerMonitor.getSystemIdleTime). */
  readonly idleSeconds: number;
  /** The hour of the day in local time (0–23), for the schedule. */
  readonly localHour: number;
}

/** Whether `hour` falls in the window [from, to) of the day; a window may wrap past midnight; from = to is all day. */
export function inSchedule(hour: number, from: number, to: number): boolean {
  if (from === to) return true;
  return from < to ? hour >= from && hour < to : hour >= from || hour < to;
}

const hh = (h: number): string => `${String(h).padStart(2, '0')}:00`;

/**
 * Decides whether the volunteer's policies hold contribution, with hysteresis on both signals:
 * the machine becomes idle only after `idleMinutes` without input and counts as in use again only on
 * fresh input (not as soon as the idle time dips under the threshold); a power-source change counts
 * only after it has lasted POWER_SETTLE_MS.
 */
export class PolicyMonitor {
  private idle = false;
  private power: { onBattery: boolean; pending?: { onBattery: boolean; since: number } } | undefined;

  /** The reason contribution is held now, or undefined when it may run. */
  evaluate(machine: MachineState, policies: Pick<Policies, 'pauseOnBattery' | 'onlyWhenIdle' | 'idleMinutes' | 'scheduleEnabled' | 'scheduleFromHour' | 'scheduleToHour'>, now: number): string | undefined {
    const onBattery = this.settledPower(machine.onBattery, now);
    if (machine.idleSeconds >= policies.idleMinutes * 60) this.idle = true;
    else if (machine.idleSeconds < IN_USE_BELOW_SECONDS) this.idle = false;
    if (policies.scheduleEnabled && !inSchedule(machine.localHour, policies.scheduleFromHour, policies.scheduleToHour)) {
      return `outside the schedule (computes from ${hh(policies.scheduleFromHour)} to ${hh(policies.scheduleToHour)})`;
    }
    if (policies.pauseOnBattery && onBattery) return 'the computer runs on battery (resumes on mains power)';
    if (policies.onlyWhenIdle && !this.idle) return `the computer is in use (runs after ${policies.idleMinutes} min without input)`;
    return undefined;
  }

  private settledPower(onBattery: boolean, now: number): boolean {
    if (this.power === undefined) {
      this.power = { onBattery };
    } else if (onBattery === this.power.onBattery) {
      delete this.power.pending;
    } else if (this.power.pending?.onBattery !== onBattery) {
      this.power.pending = { onBattery, since: now };
    } else if (now - this.power.pending.since >= POWER_SETTLE_MS) {
      this.power = { onBattery };
    }
    return this.power.onBattery;
  }
}
