import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** What onnxruntime-node's installer fetches for its CUDA provider on Linux (its script/install-metadata.js, `cuda12`). */
const CUDA_PROVIDER_FILES = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'];

/**
 * The libraries that provider loads (onnxruntime's own preload list for its CUDA 12 build): a machine
 * with only CUDA 13 (libcudart.so.13, as NVIDIA's 580 drivers and recent toolkits install) has none of
 * the first five, and ORT's loader then fails with a bare dlopen error.
 */
export const CUDA_RUNTIME_LIBRARIES = ['libcudart.so.12', 'libcublas.so.12', 'libcublasLt.so.12', 'libcufft.so.11', 'libcurand.so.10', 'libcudnn.so.9'] as const;

/** Where the dynamic loader would find a library: LD_LIBRARY_PATH's folders, then the ld.so cache. */
export interface LoaderView {
  readonly libraryPath: string;
  /** `ldconfig -p`'s output. */
  readonly ldconfig: string;
}

function systemLoaderView(): LoaderView {
  // ldconfig lives in /sbin, which is not on every user's PATH
  const ldconfig = ['ldconfig', '/sbin/ldconfig', '/usr/sbin/ldconfig'].map((cmd) => spawnSync(cmd, ['-p'], { encoding: 'utf8', timeout: 5000 })).find((r) => r.status === 0);
  return { libraryPath: process.env.LD_LIBRARY_PATH ?? '', ldconfig: ldconfig?.stdout ?? '' };
}

/**
 * The CUDA 12 runtime libraries the loader cannot find, and what other versions of them it can (a
 * CUDA 13-only machine: "libcudart.so.13"), so the message says what the machine has instead.
 */
export function missingCudaRuntime(view: LoaderView = systemLoaderView()): { missing: string[]; others: string[] } {
  const cached = new Set([...view.ldconfig.matchAll(/^\s*(\S+) \(/gm)].map((m) => m[1]!));
  const dirs = view.libraryPath.split(':').filter(Boolean);
  const found = (lib: string) => cached.has(lib) || dirs.some((d) => fs.existsSync(path.join(d, lib)));
  const missing = CUDA_RUNTIME_LIBRARIES.filter((lib) => !found(lib));
  const stems = new Set(missing.map((lib) => lib.replace(/\.so\.\d+$/, '.so.')));
  const others = [...cached].filter((lib) => [...stems].some((s) => lib.startsWith(s))).sort();
  return { missing, others };
}

/**
 * Why onnxruntime-node cannot load its CUDA provider here, when that is visible without asking it:
 * on Linux, the provider libraries were not installed (ONNXRUNTIME_NODE_INSTALL=skip, or NVIDIA's
 * download unreachable), or the CUDA 12 runtime they link against is not on the loader's path.
 * Undefined otherwise; loading may still fail (no driver, no GPU). Asking ORT instead costs an error
 * line its native logger prints on the console, which a volunteer reads as a crash.
 */
export function missingCudaProvider(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const bin = path.join(path.dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json')), 'bin', 'napi-v6', process.platform, process.arch);
  const missing = CUDA_PROVIDER_FILES.filter((f) => !fs.existsSync(path.join(bin, f)));
  if (missing.length > 0) return `onnxruntime-node was installed without its CUDA provider (${missing.join(', ')} not in ${bin})`;
  return describeMissingRuntime(missingCudaRuntime());
}

/** The sentence for missing CUDA 12 runtime libraries, or undefined when none is missing. */
export function describeMissingRuntime({ missing, others }: { missing: readonly string[]; others: readonly string[] }): string | undefined {
  if (missing.length === 0) return undefined;
  const instead = others.length > 0 ? `; the loader finds ${others.join(', ')} instead` : '';
  return `onnxruntime-node's CUDA provider needs CUDA 12 and cuDNN 9, and the loader cannot find ${missing.join(', ')}${instead} (install CUDA 12's runtime, cuBLAS, cuFFT, cuRAND and cuDNN 9 beside any newer CUDA, or add their folder to LD_LIBRARY_PATH)`;
}
