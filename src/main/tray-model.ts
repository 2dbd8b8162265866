import type { Snapshot } from '../shared/api.js';

/** Snooze lengths the tray offers, in minutes (a snooze lifts by itself, unlike a pause). */
const SNOOZE_MINUTES = [15, 60] as const;
export type SnoozeMinutes = (typeof SNOOZE_MINUTES)[number];

export type TrayAction = 'toggle' | 'open' | 'quit' | { readonly snooze: SnoozeMinutes };

export type TrayItem = { readonly kind: 'status'; readonly label: string } | { readonly kind: 'action'; readonly action: TrayAction; readonly label: string } | { readonly kind: 'separator' };

export interface TrayModel {
  /** Which icon: assets/tray.png while contributing, assets/tray-paused.png otherwise. */
  readonly icon: 'active' | 'paused';
  readonly tooltip: string;
  readonly items: readonly TrayItem[];
}

/** The one line that says what the node is doing, e.g. "Contributing · 12.3 samples/s · epoch 42". */
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
    case 'running': {
      const parts = ['Contributing'];
      if (snapshot.mine.samplesPerSecond !== null) parts.push(`${snapshot.mine.samplesPerSecond.toFixed(1)} samples/s`);
      if (snapshot.swarm.epoch !== null) parts.push(`epoch ${snapshot.swarm.epoch}`);
      return parts.join(' · ');
    }
  }
}

/** The tray icon, tooltip and menu for a snapshot; pure, so the tray's states are unit-tested. */
export function trayModel(snapshot: Snapshot | undefined): TrayModel {
  const phase = snapshot?.contribution.phase;
  const contributing = phase === 'running' || phase === 'waiting';
  const status = statusLine(snapshot);
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
      { kind: 'separator' },
      { kind: 'action', action: 'quit', label: 'Quit Cohort' },
    ],
  };
}
