import { envName } from '../config/settings.js';
import type { AppSettings, Result, Snapshot, SwarmDescription } from '../shared/api.js';
import { linkFromArgv } from './links.js';
import { PolicyMonitor, type MachineState } from './policy.js';
import type { RefusedDatabase, RuntimeClient } from './runtime-rpc.js';
import { stopNotice, trayModel, type TrayAction, type TrayModel } from './tray-model.js';

/** How often the battery / idle / schedule policies are checked. */
export const POLICY_TICK_MS = 5_000;

/** The few Electron facilities the shell uses, behind an interface so the shell is tested under plain Node. */
export interface DesktopPlatform {
  renderTray(model: TrayModel): void;
  showWindow(): void;
  hideWindow(): void;
  notify(title: string, body: string): void;
  setOpenAtLogin(enabled: boolean): void;
  /** Keeps the machine from sleeping while on (Electron's powerSaveBlocker). */
  setKeepAwake(enabled: boolean): void;
  machineState(): MachineState;
  /** Asks the volunteer whether to join the swarm a `cohort:` link names. */
  confirmJoin(swarm: SwarmDescription): Promise<boolean>;
  /** Opens a folder in the system's file manager. */
  openFolder(dir: string): void;
  /** Wall-clock time in ms (injected so snoozes are testable). */
  now(): number;
  quit(): void;
  /** Pushes a snapshot to the open windows. */
  sendSnapshot(snapshot: Snapshot): void;
  /** Tells the open windows whether the node runtime answers, if not why, and whether moving its database aside would help. */
  sendConnection(connected: boolean, detail?: string, canMoveAside?: boolean): void;
}

/**
 * The desktop app's behaviour around the runtime: the tray's state and menu, closing to the tray
 * (with a one-time notice), start at login, the battery / idle / schedule policies, keeping the
 * machine awake, `cohort:` links, and what the volunteer sees while a crashed runtime restarts.
 */
export class DesktopShell {
  private snapshot: Snapshot | undefined;
  private settings: AppSettings | undefined;
  private readonly policy = new PolicyMonitor();
  private hold: string | undefined;
  private snoozeUntil: number | undefined;
  private quitting = false;
  private keepAwake = false;
  /** Why the runtime does not answer (it crashed and restarts, or refuses its database); undefined while it is up. */
  private runtimeDown: string | undefined;
  /** Set while the runtime stays stopped on a database it refuses. */
  private refused: RefusedDatabase | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly platform: DesktopPlatform,
    private readonly runtime: RuntimeClient,
    /** Starts a runtime that moves an unusable database aside (the supervisor's). */
    private readonly restartMovingAside?: () => void,
  ) {
    this.unsubscribe = runtime.subscribe((s) => this.onSnapshot(s));
    platform.renderTray(trayModel(undefined));
  }

  /** Loads settings and the first snapshot; call once the runtime is up, and again after it restarted. */
  async start(): Promise<void> {
    this.applySettings(await this.runtime.getSettings());
    if (this.runtimeDown !== undefined) {
      this.runtimeDown = undefined;
      this.platform.sendConnection(true);
    }
    // a restarted runtime knows no policy hold: send the current one again
    this.hold = undefined;
    this.tickPolicy(this.platform.now());
    this.onSnapshot(await this.runtime.getSnapshot());
  }

  /** The runtime process exited unexpectedly and restarts in `restartInMs`: say so in the tray, the window and a notification. */
  onRuntimeExit(code: number, restartInMs: number, why?: string): void {
    const first = this.runtimeDown === undefined;
    const seconds = Math.ceil(restartInMs / 1000);
    this.runtimeDown = why === undefined ? `Node runtime stopped (exit code ${code}); restarting in ${seconds} s` : `Node runtime could not start: ${why}; trying again in ${seconds} s`;
    this.showRuntimeDown(this.runtimeDown);
    if (first && !this.quitting) this.platform.notify('Cohort’s node runtime stopped', `${this.runtimeDown}. Contribution resumes where it was once it is back.`);
  }

  /**
   * The runtime refuses its database and stays stopped, as restarting cannot help: the tray, a
   * notification and the window say so and what helps. A damaged or foreign file: the window offers to
   * move it aside. A newer Cohort's: upgrading, never moving it aside (a fresh start would set the
   * volunteer's identity and history aside for no fault of the file), or another data directory.
   */
  onRefusedDatabase(database: RefusedDatabase): void {
    this.refused = database;
    if (database.remedy === 'upgrade') {
      this.runtimeDown = `Cohort cannot start: ${database.problem}. A newer version of Cohort wrote it; it was left untouched. Upgrade Cohort to go on with it, or start Cohort with ${envName('dataDir')} set to another folder to use another data directory`;
      this.showRuntimeDown('Stopped: its database needs a newer Cohort (see the dashboard)');
      if (!this.quitting) this.platform.notify('Cohort needs upgrading', `${database.problem}. Upgrade Cohort to open it.`);
      return;
    }
    this.runtimeDown = `Cohort cannot start: ${database.problem}. It was left untouched: restore it from a backup, or move it aside (renamed beside it, kept) to start afresh with a new database, which starts a new peer identity and contribution history`;
    this.showRuntimeDown('Stopped: cannot open its database (see the dashboard)');
    if (!this.quitting) this.platform.notify('Cohort cannot open its database', `${database.problem}. Open the dashboard to move it aside and start afresh.`);
  }

  /** A window (re)loaded its page: it learns a runtime outage it missed. */
  onWindowLoaded(): void {
    if (this.runtimeDown !== undefined) this.platform.sendConnection(false, this.runtimeDown, this.canMoveAside());
  }

  /** An API call from the window (already sender-checked); settings changes are applied here too, and the log folder is opened here. */
  async call(method: string, input: unknown): Promise<unknown> {
    if (method === 'openLogFolder') return this.openLogFolder();
    if (method === 'moveDatabaseAside' && this.refused?.remedy === 'upgrade') return { ok: false, error: `${this.refused.problem}: a newer Cohort reads it, so it is not moved aside; upgrade Cohort` };
    if (method === 'moveDatabaseAside' && this.canMoveAside() && this.restartMovingAside) return this.moveDatabaseAside(this.restartMovingAside);
    const value = await this.runtime.call(method, input);
    if (method === 'updateSettings' && (value as { ok: boolean }).ok) {
      this.applySettings((value as { value: AppSettings }).value);
      // battery, idle and schedule apply on save, not at the next tick
      this.tickPolicy(this.platform.now());
    }
    return value;
  }

  /**
   * A `cohort:` link opened from outside (argv at launch, a second instance, macOS open-url): shows the
   * swarm it names and asks before joining; on yes, the link becomes the join code and contribution starts.
   */
  async openLink(link: string): Promise<void> {
    this.platform.showWindow();
    const swarm = await this.runtime.describeJoinCode({ code: link });
    if (!swarm.ok) return this.platform.notify('Cohort cannot open this link', swarm.error);
    if (!(await this.platform.confirmJoin(swarm.value))) return;
    const saved = (await this.call('updateSettings', { joinCode: link })) as Result<AppSettings>;
    if (!saved.ok) return this.platform.notify('Cohort could not join', saved.error);
    const started = await this.runtime.startContribution();
    if (!started.ok) this.platform.notify('Cohort could not start', started.error);
  }

  /** Another launch of the app (its argv may hold a `cohort:` link): this instance answers it. */
  async onSecondInstance(argv: readonly string[]): Promise<void> {
    const link = linkFromArgv(argv);
    if (link) await this.openLink(link);
    else this.platform.showWindow();
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
      case 'logs': {
        const r = this.openLogFolder();
        if (!r.ok) this.platform.notify('Cohort', r.error);
        return;
      }
      case 'quit':
        this.requestQuit();
        return;
      case 'toggle': {
        const phase = this.snapshot?.contribution.phase;
        this.snoozeUntil = undefined; // an explicit start or pause ends a snooze
        this.tickPolicy(this.platform.now());
        try {
          const r = phase === 'running' || phase === 'waiting' ? await this.runtime.pauseContribution() : await this.runtime.startContribution();
          if (!r.ok) this.platform.notify('Cohort', r.error);
        } catch (err) {
          this.platform.notify('Cohort', (err as Error).message);
        }
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
      void this.runtime.updateSettings({ trayNoticeShown: true }).catch(() => undefined); // shown again next time if it was not stored
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

  /** Checks the snooze and the policies and tells the runtime when the hold changes. */
  tickPolicy(now: number): void {
    if (!this.settings || this.runtimeDown !== undefined) return;
    if (this.snoozeUntil !== undefined && now >= this.snoozeUntil) this.snoozeUntil = undefined;
    const policyHold = this.policy.evaluate(this.platform.machineState(), this.settings.policies, now);
    const hold = this.snoozeUntil !== undefined ? `snoozed until ${new Date(this.snoozeUntil).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}` : policyHold;
    if (hold === this.hold) return;
    this.hold = hold;
    this.runtime.setPolicyHold(hold);
  }

  dispose(): void {
    this.unsubscribe();
    this.setKeepAwake(false);
  }

  private moveDatabaseAside(restart: () => void): Result<null> {
    this.refused = undefined;
    this.runtimeDown = 'Moving the database aside and starting afresh…';
    this.platform.sendConnection(false, this.runtimeDown);
    restart();
    return { ok: true, value: null };
  }

  /** Tray and window while the runtime does not answer; the tray gets a short `trayLine`. */
  private showRuntimeDown(trayLine: string): void {
    this.setKeepAwake(false);
    this.platform.renderTray(trayModel(this.snapshot, trayLine));
    this.platform.sendConnection(false, this.runtimeDown, this.canMoveAside());
  }

  /** Whether moving the database aside would let the runtime start (it refused a damaged or foreign file). */
  private canMoveAside(): boolean {
    return this.refused?.remedy === 'move-aside';
  }

  private openLogFolder(): Result<null> {
    const dir = this.snapshot?.about.logDir;
    if (!dir) return { ok: false, error: 'the log folder is not known until the node runtime has started' };
    this.platform.openFolder(dir);
    return { ok: true, value: null };
  }

  private onSnapshot(snapshot: Snapshot): void {
    const notice = stopNotice(this.snapshot, snapshot);
    this.snapshot = snapshot;
    if (notice) this.platform.notify(notice.title, notice.body);
    this.platform.renderTray(trayModel(snapshot, this.runtimeDown));
    this.platform.sendSnapshot(snapshot);
    this.updateKeepAwake();
  }

  private applySettings(next: AppSettings): void {
    if (this.settings?.startAtLogin !== next.startAtLogin) this.platform.setOpenAtLogin(next.startAtLogin);
    this.settings = next;
    this.updateKeepAwake();
  }

  /** Awake while contributing (not while waiting: a held node lets the machine sleep), if the volunteer wants it. */
  private updateKeepAwake(): void {
    this.setKeepAwake(this.runtimeDown === undefined && this.settings?.policies.keepAwake === true && this.snapshot?.contribution.phase === 'running');
  }

  private setKeepAwake(on: boolean): void {
    if (on === this.keepAwake) return;
    this.keepAwake = on;
    this.platform.setKeepAwake(on);
  }
}
