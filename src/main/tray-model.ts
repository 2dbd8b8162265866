import { CONTRIBUTING_DETAIL } from '../node/contribution-machine.js';
import type { Snapshot } from '../shared/api.js';

/** Snooze lengths the tray offers, in minutes (a snooze lifts by itself, unlike a pause). */
const SNOOZE_MINUTES = [15, 60] as const;
export type SnoozeMinutes = (typeof SNOOZE_MINUTES)[number];

export type TrayAction = 'toggle' | 'open' | 'logs' | 'quit' | { readonly snooze: SnoozeMinutes };

export type TrayItem = { readonly kind: 'status'; readonly label: string } | { readonly kind: 'action'; readonly action: TrayAction; readonly label: string } | { readonly kind: 'separator' };

export interface TrayModel {
  /** Which icon: assets/tray.png while contributing, assets/tray-paused.png otherwise. */
  readonly icon: 'active' | 'paused';
  readonly tooltip: string;
  readonly items: readonly TrayItem[];
}

/**
 * The one line that says what the node is doing, e.g. "Contributing · 12.3 samples/s · epoch 42", or
 * what limits a running node, as the dashboard's header says it: "Training on this machine alone: no join code set · …".
 */
export function statusLine(snapshot: Snapshot | undefined): string {
  if (!snapshot) return 'Starting…';
  const c = snapshot.contribution;
  switch (c.phase) {
    case 'stopped':
      return 'Not started';
    case 'paused':
      return 'Paused by you';
    case 'waiting':
      return `Waiting: ${c.detail.replace(/^waiting: /, '')}`;
    case 'halted':
      return `Halted: ${c.detail.replace(/^halted: /, '')}`;
    case 'error':
      return `Error: ${c.detail.replace(/^error: /, '')}`;
    case 'running': {
      const parts = [c.detail === CONTRIBUTING_DETAIL ? 'Contributing' : c.detail.charAt(0).toUpperCase() + c.detail.slice(1)];
      if (snapshot.mine.samplesPerSecond !== null) parts.push(`${snapshot.mine.samplesPerSecond.toFixed(1)} samples/s`);
      if (snapshot.swarm.epoch !== null) parts.push(`epoch ${snapshot.swarm.epoch}`);
      return parts.join(' · ');
    }
  }
}

/**
 * The notification when training stops by itself (the memory limit, an error), from the phase before
 * and after a snapshot; undefined when nothing stopped by itself (a pause, a policy hold).
 */
export function stopNotice(before: Snapshot | undefined, after: Snapshot): { title: string; body: string } | undefined {
  const { phase, detail } = after.contribution;
  if (before?.contribution.phase === phase || (phase !== 'halted' && phase !== 'error')) return undefined;
  const why = detail.replace(/^(halted: memory limit — |error: )/, '');
  return phase === 'halted'
    ? { title: 'Cohort stopped: memory limit', body: `${why}. Raise the memory limit in Settings, then press Start.` }
    : { title: 'Cohort stopped on an error', body: `${why}. The log has the details; press Start to try again.` };
}

/**
 * The tray icon, tooltip and menu for a snapshot; pure, so the tray's states are unit-tested.
 * `runtimeDown` says why the node runtime is not answering (it crashed and is being restarted).
 */
export function trayModel(snapshot: Snapshot | undefined, runtimeDown?: string): TrayModel {
  const phase = runtimeDown === undefined ? snapshot?.contribution.phase : undefined;
  const contributing = phase === 'running' || phase === 'waiting';
  const status = runtimeDown ?? statusLine(snapshot);
  return {
    icon: phase === 'running' ? 'active' : 'paused',
    // the tooltip says why it is not running, as volunteers asked of BOINC
    tooltip: `Cohort — ${status}`,
    items: [
      { kind: 'status', label: status },
      { kind: 'separator' },
      { kind: 'action', action: 'toggle', label: contributing ? 'Pause contributing' : 'Start contributing' },
      ...(phase === 'running' ? SNOOZE_MINUTES.map((m): TrayItem => ({ kind: 'action', action: { snooze: m }, label: `Snooze for ${m < 60 ? `${m} minutes` : `${m / 60} hour`}` })) : []),
      { kind: 'action', action: 'open', label: 'Open dashboard' },
      { kind: 'action', action: 'logs', label: 'Open log folder' },
      { kind: 'separator' },
      { kind: 'action', action: 'quit', label: 'Quit Cohort' },
    ],
  };
}
