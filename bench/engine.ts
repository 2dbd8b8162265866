/**
 * Training-step benchmark: one ALBERT forward + backward (MLM + SOP loss, every gradient) at B=8,
 * S=128 for the tiny/base/large presets on onnxruntime CPU, and the same step in PyTorch
 * (bench/engine_torch.py, Debian python3-torch) in the same run → ort_vs_torch = ORT ÷ torch step
 * time (base). Also the LAMB update time for ALBERT-large (lamb_ms_large).
 *
 * ORT and torch each run in a child process per preset (so peak RSS is per preset), stepping in
 * turn (bench/_stepper.ts) so that both see the same load on a shared machine. Each step's CPU time
 * (whole process) is reported too: with --threads 1 it is the steadier measure on a loaded machine,
 * since waiting for a core does not count (ort_vs_torch_cpu). A last, profiled ORT step gives the share
 * of its kernel time spent in matrix products; that share of the timed step ÷ torch's step
 * (ort_matmul_vs_torch) is the floor of ort_vs_torch.
 * Usage: npm run bench -- engine [--presets tiny,base,large] [--steps N] [--threads T]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { PRESET_NAMES, PRESETS, type AlbertConfig, type PresetName } from '../src/engine/albert/config.js';
import { albertParamSpecs, initAlbertParams } from '../src/engine/albert/params.js';
import type { AlbertBatch } from '../src/engine/batch.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import type { ParameterSet } from '../src/engine/params.js';
import { Rng } from '../src/engine/rng.js';
import { syntheticBatch } from '../src/engine/synthetic.js';
import { timeLambStep } from './_lamb.js';
import { lastRunProfile, type RunProfile } from './_ort-profile.js';
import { arg, presetsArg } from './_args.js';
import { median, reportJson } from './_report.js';
import { Stepper } from './_stepper.js';
import { torchEnv } from './_torch_check.js';

const B = 8;
const S = 128;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PYTHON = process.env.COHORT_PYTHON ?? '/usr/bin/python3';
/** Every step is bounded: one ALBERT-large step on a busy 2-core machine can take a minute or two. */
const STEP_TIMEOUT_MS = 5 * 60_000;


/** Child mode: an ORT stepper for one preset (see Stepper); the first step builds graph and session. */
async function serveOrt(preset: PresetName, threads: number): Promise<void> {
  const config = PRESETS[preset];
  const params = initAlbertParams(config, 0);
  const grads = params.zerosLike();
  const batch = syntheticBatch(config, B, S, new Rng(1));
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: threads });
  let loss: number | null = null;
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line.trim() !== 'step') break;
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    const r = await backend.forwardBackward(params, batch, grads);
    const ms = performance.now() - start;
    const cpu = process.cpuUsage(cpuStart);
    loss ??= r.loss;
    process.stdout.write(JSON.stringify({ ms, cpu_ms: (cpu.user + cpu.system) / 1000 }) + '\n');
  }
  await backend.close();
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  const profile = await profiledStep(config, params, batch, threads);
  process.stdout.write(JSON.stringify({ loss, peak_rss_mb: peakRssMb, matmul_ms: profile.matmulMs, kernel_ms: profile.kernelMs }) + '\n');
}

/**
 * One step in a separate, profiled session (after the timed ones, which profiling would slow): where
 * its kernel time went. The matrix products' share is the floor of the ORT step on this CPU: no graph
 * rewrite short of fewer FLOPs or a faster GEMM goes below it.
 */
async function profiledStep(config: AlbertConfig, params: ParameterSet, batch: AlbertBatch, threads: number): Promise<RunProfile> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-engine-profile-'));
  try {
    const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: threads, profileFilePrefix: path.join(dir, 'ort') });
    await backend.forwardBackward(params, batch); // the first run also builds the session
    await backend.forwardBackward(params, batch);
    await backend.close();
    const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
    if (!file) throw new Error(`onnxruntime wrote no profile into ${dir}`);
    return lastRunProfile(path.join(dir, file));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function torchAvailable(): string | undefined {
  const r = spawnSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8', timeout: 60_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

async function main(): Promise<void> {
  const threads = Number(arg('--threads', String(os.availableParallelism())));
  const steps = Number(arg('--steps', '2'));
  if (process.argv.includes('--child')) return serveOrt(arg('--child', 'tiny') as PresetName, threads);
  const presets = presetsArg('--presets', PRESET_NAMES.join(','));
  const torchVersion = torchAvailable();
  console.log(`engine bench: B=${B} S=${S}, 1 warm-up + ${steps} timed steps, ORT and torch steps interleaved, ${threads} threads each; onnxruntime CPU vs ${torchVersion ? `PyTorch ${torchVersion} (${PYTHON})` : `no PyTorch (${PYTHON} cannot import torch; apt-get install python3-torch libopenblas0-openmp)`}`);
  const figures: Record<string, number | string | null> = { batch_size: B, seq_len: S, threads, torch_version: torchVersion ?? null };
  for (const preset of presets) {
    const config = PRESETS[preset];
    const ort = new Stepper(`ORT ${preset}`, process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', preset, '--threads', String(threads)], STEP_TIMEOUT_MS);
    const torch = torchVersion ? new Stepper(`torch ${preset}`, PYTHON, [path.join(HERE, 'engine_torch.py'), JSON.stringify({ config, batch: B, seq: S, threads })], STEP_TIMEOUT_MS, torchEnv()) : undefined;
    const ortMs: number[] = [];
    const torchMs: number[] = [];
    const ortCpu: number[] = [];
    const torchCpu: number[] = [];
    let firstMs = 0;
    try {
      for (let i = 0; i <= steps; i++) {
        const o = await ort.step();
        const t = torch ? await torch.step() : undefined;
        if (i === 0) firstMs = o.ms;
        else {
          ortMs.push(o.ms);
          ortCpu.push(o.cpuMs);
          if (t !== undefined) {
            torchMs.push(t.ms);
            torchCpu.push(t.cpuMs);
          }
        }
      }
    } catch (err) {
      ort.kill();
      torch?.kill();
      throw err;
    }
    const o = (await ort.quit()) as { loss: number; peak_rss_mb: number; matmul_ms: number; kernel_ms: number };
    const t = torch ? ((await torch.quit()) as { loss: number; peak_rss_mb: number }) : undefined;
    const oMs = median(ortMs);
    const tMs = t ? median(torchMs) : undefined;
    const params = albertParamSpecs(config).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
    const ratio = tMs ? oMs / tMs : null;
    const oCpu = median(ortCpu);
    const tCpu = t ? median(torchCpu) : undefined;
    const cpuRatio = tCpu ? oCpu / tCpu : null;
    console.log(
      `${preset.padEnd(5)} ${(params / 1e6).toFixed(2)}M params  ORT ${oMs.toFixed(0)} ms/step (${((B * 1000) / oMs).toFixed(2)} samples/s, first step ${firstMs.toFixed(0)} ms with session build, peak RSS ${o.peak_rss_mb.toFixed(0)} MB, loss ${o.loss.toFixed(3)})` +
        (t ? `  torch ${tMs!.toFixed(0)} ms/step (peak RSS ${t.peak_rss_mb.toFixed(0)} MB, loss ${t.loss.toFixed(3)})  ORT/torch ${ratio!.toFixed(2)}; CPU time ORT ${oCpu.toFixed(0)} ms, torch ${tCpu!.toFixed(0)} ms, ORT/torch ${cpuRatio!.toFixed(2)}` : ''),
    );
    // profiling slows the run it records, so its matrix products' share scales the timed step
    const share = o.matmul_ms / o.kernel_ms;
    const floor = tMs ? (share * oMs) / tMs : null;
    console.log(
      `${preset.padEnd(5)} profiled ORT step: matrix products ${o.matmul_ms.toFixed(0)} of ${o.kernel_ms.toFixed(0)} ms of kernels (${(100 * share).toFixed(0)} %)` +
        (floor !== null ? `, so ${(share * oMs).toFixed(0)} ms of the timed step: ${floor.toFixed(2)} of torch's step, the lowest ORT/torch without fewer FLOPs or a faster GEMM` : ''),
    );
    figures[`${preset}_step_ms`] = Math.round(oMs);
    figures[`${preset}_matmul_share`] = Number(share.toFixed(3));
    figures[preset === 'base' ? 'ort_matmul_vs_torch' : `ort_matmul_vs_torch_${preset}`] = floor === null ? null : Number(floor.toFixed(3));
    figures[`${preset}_samples_per_s`] = Number(((B * 1000) / oMs).toFixed(3));
    figures[`${preset}_peak_rss_mb`] = Math.round(o.peak_rss_mb);
    figures[`${preset}_torch_step_ms`] = tMs ? Math.round(tMs) : null;
    figures[`${preset}_torch_peak_rss_mb`] = t ? Math.round(t.peak_rss_mb) : null;
    figures[`${preset}_cpu_ms`] = Math.round(oCpu);
    figures[`${preset}_torch_cpu_ms`] = tCpu ? Math.round(tCpu) : null;
    figures[preset === 'base' ? 'ort_vs_torch' : `ort_vs_torch_${preset}`] = ratio === null ? null : Number(ratio.toFixed(3));
    figures[preset === 'base' ? 'ort_vs_torch_cpu' : `ort_vs_torch_cpu_${preset}`] = cpuRatio === null ? null : Number(cpuRatio.toFixed(3));
  }
  const large = albertParamSpecs(PRESETS.large);
  const lamb = timeLambStep(large.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0), large);
  console.log(`LAMB update, ALBERT-large (${(lamb.paramCount / 1e6).toFixed(2)}M params): ${lamb.msPerStep.toFixed(1)} ms (target < 60)`);
  figures.lamb_ms_large = Number(lamb.msPerStep.toFixed(2));
  reportJson(figures);
}

await main();
