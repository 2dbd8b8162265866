import type { Precision } from './albert/graph.js';

/** onnxruntime execution providers a backend can be asked for (see OrtBackendOptions.provider). */
export type ProviderChoice = 'auto' | 'cpu' | 'cuda' | 'webgpu';

/**
 * Why a provider cannot train at a precision, or undefined. The WebGPU provider trains in fp32 only:
 * its fp16 weight gradients were wrong at every batch size on an H200 and on Mesa's lavapipe
 * (docs/engine.md, "WebGPU provider"). Kept apart from ort-backend.ts so the CLI checks its flags
 * without loading onnxruntime.
 */
export function providerPrecisionProblem(provider: ProviderChoice | undefined, precision: Precision | undefined): string | undefined {
  if (provider === 'webgpu' && precision === 'fp16') return 'the WebGPU provider trains in fp32 only (its fp16 gradients are wrong); use --precision fp32 or another provider';
  return undefined;
}

/** Throws where the provider cannot train at the precision (providerPrecisionProblem); both backends call it. */
export function checkProviderPrecision(options: { readonly provider?: ProviderChoice; readonly precision?: Precision }): void {
  const problem = providerPrecisionProblem(options.provider, options.precision);
  if (problem !== undefined) throw new Error(problem);
}
