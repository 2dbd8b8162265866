import type { AppSettings, Snapshot } from '../shared/api.js';
import { PolicyMonitor, type MachineState } from './policy.js';
import type { RuntimeClient } from './runtime-rpc.js';
import { trayModel, type TrayAction, type TrayModel } from './tray-model.js';

/** How often the battery / idle policies are checked. */
export const POLICY_TICK_MS = 5_000;

/** The few Electron facilities the shell uses, behind an interface so the shell is tested under plain Node. */
export interface DesktopPlatform {
  renderTray(model: TrayModel): void;
  showWindow(): void;
  hideWindow(): void;
  notify(title: string, body: string): void;
  setOpenAtLogin(enabled: boolean): void;
  machineState(): MachineState;
  /** Wall-clock time in ms (injected so snoozes are testable). */
  now(): number;
  quit(): void;
  /** Pushes a snapshot to the open windows. */
  sendSnapshot(snapshot: Snapshot): void;
}

/**
 * The desktop app's behaviour around the runtime: the tray's state and menu, closing to the tray
 * (with a one-time notice), start at login, and the battery / idle policies.
 */
export class DesktopShell {
  private snapshot: Snapshot | undefined;
  private settings: AppSettings | undefined;
  private readonly policy = new PolicyMonitor();
  private hold: string | undefined;
  private snoozeUntil: number | undefined;
  private quitting = false;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly platform: DesktopPlatform,
    private readonly runtime: RuntimeClient,
  ) {
    this.unsubscribe = runtime.subscribe((s) => this.onSnapshot(s));
    platform.renderTray(trayModel(undefined));
  }

  /** Loads settings and the first snapshot; call once the runtime is up. */
  async start(): Promise<void> {
    this.applySettings(await this.runtime.getSettings());
    this.onSnapshot(await this.runtime.getSnapshot());
  }

  /** An API call from the window (already sender-checked); settings changes are applied here too. */
  async call(method: string, input: unknown): Promise<unknown> {
    const value = await this.runtime.call(method, input);
    if (method === 'updateSettings' && (value as { ok: boolean }).ok) this.applySettings((value as { value: AppSettings }).value);
    return value;
  }

  async onTrayAction(action: TrayAction): Promise<void> {
    if (typeof action === 'object') {
      this.snoozeUntil = this.platform.now() + action.snooze * 60_000;
      this.tickPolicy(this.platform.now());
      return;
    }
    switch (action) {
      case 'open':
        this.platform.showWindow();
        return;
      case 'quit':
        this.requestQuit();
        return;
      case 'toggle': {
        const phase = this.snapshot?.contribution.phase;
        this.snoozeUntil = undefined; // an explicit start or pause ends a snooze
        this.tickPolicy(this.platform.now());
        const r = phase === 'running' || phase === 'waiting' ? await this.runtime.pauseContribution() : await this.runtime.startContribution();
        if (!r.ok) this.platform.notify('Cohort', r.error);
        return;
      }
    }
  }

  /**
   * The window is closing: unless the app is quitting it hides to the tray and keeps contributing.
   * The first time, a notice says so. Returns whether the close should be prevented.
   */
  onWindowClose(): boolean {
    if (this.quitting) return false;
    this.platform.hideWindow();
    if (this.settings && !this.settings.trayNoticeShown) {
      this.platform.notify('Cohort keeps running', 'Cohort is still contributing in the tray. Use the tray icon to open the dashboard, pause or quit.');
      this.settings = { ...this.settings, trayNoticeShown: true };
      void this.runtime.updateSettings({ trayNoticeShown: true });
    }
    return true;
  }

  requestQuit(): void {
    this.markQuitting();
    this.platform.quit();
  }

  /** The app is quitting (from the tray or the OS): windows close for real from now on. */
  markQuitting(): void {
    this.quitting = true;
  }

  /** Checks the snooze and the battery / idle policies and tells the runtime when the hold changes. */
  tickPolicy(now: number): void {
    if (!this.settings) return;
    if (this.snoozeUntil !== undefined && now >= this.snoozeUntil) this.snoozeUntil = undefined;
    const policyHold = this.policy.evaluate(this.platform.machineState(), this.settings.policies, now);
    const hold = this.snoozeUntil !== undefined ? `snoozed until ${new Date(this.snoozeUntil).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}` : policyHold;
    if (hold === this.hold) return;
    this.hold = hold;
    this.runtime.setPolicyHold(hold);
  }

  dispose(): void {
    this.unsubscribe();
  }

  private onSnapshot(snapshot: Snapshot): void {
    this.snapshot = snapshot;
    this.platform.renderTray(trayModel(snapshot));
    this.platform.sendSnapshot(snapshot);
  }

  private applySettings(next: AppSettings): void {
    if (this.settings?.startAtLogin !== next.startAtLogin) this.platform.setOpenAtLogin(next.startAtLogin);
    this.settings = next;
  }
}
