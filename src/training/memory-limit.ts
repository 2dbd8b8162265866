/**
 * The volunteer's memory limit, for both trainers (alone and with a swarm): on Start the largest
 * micro-batch whose estimated peak fits (or a refusal saying what it would need), and while training
 * a watchdog that notices when the process grows past the limit anyway (a leak, another graph shape,
 * the estimate being off on this machine) and stops training before the operating system has to.
 */
import { type AlbertConfig, formatBytes, planGpuMicroBatch, planMicroBatch, type GpuInfo, type TrainingShape } from '../engine/index.js';
import type { Logger } from '../log/logger.js';

/** Where the watchdog reads the process's memory; tests pass their own. */
export interface RssProbe {
  /** Resident set size of the process now, in bytes. */
  rssBytes(): number;
}

/** How a trainer's memory watchdog samples; tests pass their own. */
export interface WatchdogOptions {
  /** Where the watchdog reads this process's memory. @default the process's RSS */
  readonly memoryProbe?: RssProbe;
  /** How often it samples. @default WATCHDOG_INTERVAL_MS */
  readonly watchdogIntervalMs?: number;
}

const processRss: RssProbe = { rssBytes: () => process.memoryUsage.rss() };

/** Seconds between samples while training. */
const WATCHDOG_INTERVAL_MS = 5000;
/** Consecutive samples over the limit that stop training (one sample over is a passing spike, e.g. a checkpoint's encoding). */
export const WATCHDOG_SAMPLES_OVER = 3;

/** Training went over the limit, or would: why it stopped, in the volunteer's words. */
export class MemoryLimitError extends Error {
  override readonly name = 'MemoryLimitError';
}

/**
 * The micro-batch to train with under a limit of `limitMiB`: the configured one when it fits, else
 * the largest smaller one that does (logged); throws MemoryLimitError when even one sample does not fit.
 */
export function fitMicroBatch(config: AlbertConfig, shape: TrainingShape, limitMiB: number, log: Pick<Logger, 'info'>): number {
  const plan = planMicroBatch(config, shape, limitMiB * 2 ** 20);
  if (!plan.fits) throw new MemoryLimitError(plan.reason);
  if (plan.batchSize !== shape.batchSize) log.info(`memory limit ${limitMiB} MiB: micro-batch ${shape.batchSize} → ${plan.batchSize} (estimated peak ${formatBytes(plan.estimate.totalBytes)})`);
  return plan.batchSize;
}

/**
 * The micro-batch `batchSize` shrunk to what `gpu`'s free memory holds (planGpuMicroBatch), logged
 * when smaller; MemoryLimitError when one sequence does not fit. Without a GPU, `batchSize` as it is.
 */
export function fitGpuMicroBatch(config: AlbertConfig, shape: Pick<TrainingShape, 'seqLen' | 'precision'>, batchSize: number, gpu: GpuInfo | null, log: Pick<Logger, 'info'>): number {
  if (gpu === null) return batchSize;
  const plan = planGpuMicroBatch(config, { seqLen: shape.seqLen, precision: shape.precision, maxBatchSize: batchSize }, gpu);
  if (!plan.fits) throw new MemoryLimitError(plan.reason);
  if (plan.batchSize !== batchSize) log.info(`GPU ${gpu.name}, ${formatBytes(gpu.freeBytes)} free: micro-batch ${batchSize} → ${plan.batchSize} (estimated ${formatBytes(plan.estimateBytes)})`);
  return plan.batchSize;
}

export interface MemoryWatchdogInit {
  readonly limitBytes: number;
  readonly probe?: RssProbe;
  /** Called once, at the sample that makes WATCHDOG_SAMPLES_OVER in a row, with the reason to show. */
  readonly onExceeded: (reason: string) => void;
}

export class MemoryWatchdog {
  private over = 0;
  private tripped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly probe: RssProbe;

  constructor(private readonly init: MemoryWatchdogInit) {
    this.probe = init.probe ?? processRss;
  }

  /** Takes one sample; returns true when this sample tripped the watchdog. */
  sample(): boolean {
    if (this.tripped) return false;
    const rss = this.probe.rssBytes();
    this.over = rss > this.init.limitBytes ? this.over + 1 : 0;
    if (this.over < WATCHDOG_SAMPLES_OVER) return false;
    this.tripped = true;
    this.stop();
    this.init.onExceeded(`memory use ${formatBytes(rss)} stayed over the ${formatBytes(this.init.limitBytes)} limit — press Start to resume, or raise the limit in Settings`);
    return true;
  }

  /** Samples every `intervalMs` until stopped or tripped. */
  start(intervalMs = WATCHDOG_INTERVAL_MS): void {
    this.stop();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
