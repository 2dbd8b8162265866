import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** What onnxruntime-node's installer fetches for its CUDA provider on Linux (its script/install-metadata.js, `cuda12`). */
const CUDA_PROVIDER_FILES = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'];

/**
 * Why onnxruntime-node cannot load its CUDA provider here, when that is visible without asking it:
 * on Linux, the provider libraries were not installed (ONNXRUNTIME_NODE_INSTALL=skip, or NVIDIA's
 * download unreachable). Undefined otherwise; loading may still fail (no driver, no GPU). Asking ORT
 * instead costs an error line its native logger prints on the console, which a volunteer reads as a crash.
 */
export function missingCudaProvider(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const bin = path.join(path.dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json')), 'bin', 'napi-v6', process.platform, process.arch);
  const missing = CUDA_PROVIDER_FILES.filter((f) => !fs.existsSync(path.join(bin, f)));
  return missing.length === 0 ? undefined : `onnxruntime-node was installed without its CUDA provider (${missing.join(', ')} not in ${bin})`;
}
