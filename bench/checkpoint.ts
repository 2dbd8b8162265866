// Full-state checkpoints of the large preset (ALBERT-large: parameters + LAMB moments, ≈ 214 MB):
// how long a save takes while the event loop keeps running (a metric written every 50 ms on the
// main thread's connection stands in for the training peer's own store writes), the longest
// event-loop stall during a save and the longest of those metric writes, how long loading takes, the
// CPU time of each (all threads: what a save costs a busy machine, less noisy than the wall time on a
// shared one), and the peak RSS of each.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { FullStateSaver, loadFullState, PEER_STATE_CHECKPOINT } from '../src/collab/full-state.js';
import { newRunParams } from '../src/collab/run-params.js';
import { DEFAULT_RUN_SETTINGS } from '../src/collab/run-settings.js';
import { checkConfig, createOptimizer, DynamicLossScaler, initAlbertParams, PRESETS } from '../src/engine/index.js';
import { createLogger } from '../src/log/logger.js';
import { openStore } from '../src/store/index.js';
import { median, reportJson } from './_report.js';

const ROUNDS = 4; // the first also starts the worker and touches the shared buffers' pages
const rssMiB = (): number => Math.round(process.resourceUsage().maxRSS / 1024);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-checkpoint-'));
const store = openStore(dir);
const saver = new FullStateSaver(store, createLogger({ logLevel: 'silent', logFormat: 'json' }));

try {
  const config = checkConfig(PRESETS.large);
  const params = initAlbertParams(config, 0);
  const optimizer = createOptimizer(params, { kind: 'lamb', lr: 1e-3 });
  const grads = params.zerosLike();
  grads.data.fill(1e-4);
  optimizer.step(params, grads, 1e-3); // moments that are not all zeros
  const live = { config, params, optimizer, scaler: new DynamicLossScaler() };
  const meta = { runId: 'bench', run: newRunParams(DEFAULT_RUN_SETTINGS, null) };
  const rssBefore = rssMiB();
  console.log(`large preset: ${params.size} parameters, ${((3 * params.size * 4) / 2 ** 20).toFixed(0)} MiB of parameters and moments; RSS ${rssBefore} MiB before saving`);

  // the machine's own noise: the longest stall of the same loop (timer, metric writes) with no save running
  const idle = await watchLoop(0, () => new Promise((resolve) => setTimeout(resolve, 3000)));
  console.log(`longest event-loop stall in 3 s without a save: ${idle.stallMs.toFixed(1)} ms (longest metric write ${idle.writeMs.toFixed(1)} ms)`);
  const saves: Array<{ snapshotMs: number; totalMs: number; cpuMs: number; stallMs: number; writeMs: number }> = [];
  for (let epoch = 1; epoch <= ROUNDS; epoch++) {
    let snapshotMs = 0;
    let totalMs = 0;
    const cpu = process.cpuUsage();
    const { stallMs, writeMs } = await watchLoop(epoch, async () => {
      const started = performance.now();
      const save = saver.save(PEER_STATE_CHECKPOINT, { epoch, ...live }, meta, 2);
      if (!save) throw new Error('a save was still running');
      await save.snapshotted;
      snapshotMs = performance.now() - started;
      await save.written;
      totalMs = performance.now() - started;
    });
    const cpuMs = cpuMsSince(cpu);
    saves.push({ snapshotMs, totalMs, cpuMs, stallMs, writeMs });
    console.log(`save ${epoch}: ${totalMs.toFixed(0)} ms (snapshot ${snapshotMs.toFixed(0)} ms, CPU ${cpuMs.toFixed(0)} ms), longest event-loop stall ${stallMs.toFixed(1)} ms, longest metric write ${writeMs.toFixed(1)} ms`);
  }
  const rssSave = rssMiB();
  const loads: number[] = [];
  const loadCpu: number[] = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    const cpu = process.cpuUsage();
    const loaded = loadFullState(store, PEER_STATE_CHECKPOINT, { runId: 'bench' });
    loads.push(performance.now() - started);
    loadCpu.push(cpuMsSince(cpu));
    if (loaded?.state.epoch !== ROUNDS) throw new Error(`loaded epoch ${loaded?.state.epoch}, saved ${ROUNDS}`);
    console.log(`load ${i + 1}: ${loads.at(-1)!.toFixed(0)} ms (CPU ${loadCpu.at(-1)!.toFixed(0)} ms)`);
  }
  const bytes = store.checkpoints.list(PEER_STATE_CHECKPOINT)[0]!.size;
  const steady = saves.slice(1);
  const save = median(steady.map((s) => s.totalMs));
  const load = median(loads);
  const stall = Math.max(...saves.map((s) => s.stallMs));
  const write = Math.max(...saves.map((s) => s.writeMs));
  console.log(`checkpoint of ${(bytes / 2 ** 20).toFixed(0)} MiB: save ${save.toFixed(0)} ms (median after the first; first ${saves[0]!.totalMs.toFixed(0)} ms), load ${load.toFixed(0)} ms (median of ${loads.length}, checksum verified and decoded)`);
  console.log(`longest event-loop stall during a save ${stall.toFixed(1)} ms (goal < 50; ${idle.stallMs.toFixed(1)} ms without one), longest metric write ${write.toFixed(1)} ms (${idle.writeMs.toFixed(1)} ms without); peak RSS ${rssSave} MiB after saving, ${rssMiB()} MiB after loading`);
  console.log(`goals: save < 1000 ms ${save < 1000 ? 'met' : 'NOT met'}, stall < 50 ms ${stall < 50 ? 'met' : 'NOT met'}`);
  reportJson({
    checkpoint_mib: Math.round(bytes / 2 ** 20),
    save_ms_large: Math.round(save),
    first_save_ms_large: Math.round(saves[0]!.totalMs),
    snapshot_ms_large: Math.round(median(steady.map((s) => s.snapshotMs))),
    save_cpu_ms_large: Math.round(median(steady.map((s) => s.cpuMs))),
    save_stall_ms: Number(stall.toFixed(1)),
    idle_stall_ms: Number(idle.stallMs.toFixed(1)),
    metric_write_max_ms: Number(write.toFixed(1)),
    load_ms_large: Math.round(load),
    load_cpu_ms_large: Math.round(median(loadCpu)),
    peak_rss_mib_before: rssBefore,
    peak_rss_mib_save: rssSave,
    peak_rss_mib_load: rssMiB(),
  });
} finally {
  await saver.close();
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

/** CPU time (user + system, all threads) since `from` in ms. */
function cpuMsSince(from: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(from);
  return (used.user + used.system) / 1000;
}

/** The longest event-loop stall and the longest metric write (ms) while `work` runs, with a metric written every 50 ms on the main thread's connection. */
async function watchLoop(epoch: number, work: () => Promise<unknown>): Promise<{ stallMs: number; writeMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  let writeMs = 0;
  const writer = setInterval(() => {
    const started = performance.now();
    store.metrics.record([{ series: 'loss', value: 1, epoch, ts: Date.now() }]);
    writeMs = Math.max(writeMs, performance.now() - started);
  }, 50);
  delay.enable();
  try {
    await work();
  } finally {
    delay.disable();
    clearInterval(writer);
  }
  return { stallMs: delay.max / 1e6, writeMs };
}
