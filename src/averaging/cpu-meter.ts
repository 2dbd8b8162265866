import { performance } from 'node:perf_hooks';

/** What one all-reduce cost this process's CPU. */
export interface RoundCpu {
  /**
   * Seconds the main thread's event loop was busy during the round: the averaging's cost. Node reads
   * no per-thread CPU and training runs in a worker thread of the same process, so the process's CPU
   * would count training too; the main thread runs the averaging (and the node's lighter chores).
   * It is time not spent idle, so on an overloaded machine it includes waits for a core.
   */
  readonly busySeconds: number;
  /** CPU-seconds of the whole process over the round (user + system, every thread: training included), for context. */
  readonly processSeconds: number;
  /** Bytes of the vector averaged (4 per value). */
  readonly bytes: number;
}

/** Starts measuring a round; the returned function ends it. */
export function startCpuMeter(): (bytes: number) => RoundCpu {
  const loop = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  return (bytes) => {
    const { user, system } = process.cpuUsage(cpu);
    return { busySeconds: performance.eventLoopUtilization(loop).active / 1000, processSeconds: (user + system) / 1e6, bytes };
  };
}

/** Main-thread busy seconds per GB (1e9 bytes) averaged; undefined for a round of no bytes. */
export function busySecondsPerGb(cpu: RoundCpu): number | undefined {
  return cpu.bytes > 0 ? cpu.busySeconds / (cpu.bytes / 1e9) : undefined;
}
