/**
 * The engine's front door: ALBERT's forward and backward graph run by onnxruntime, the optimizers
 * that update the weights in TypeScript, and the contracts (config, parameters, batches, checkpoints)
 * the rest of Cohort builds on. Code outside the engine imports from here.
 */
export { checkConfig, configFromHf, configToHf, PRESETS, type AlbertConfig, type PresetName } from './albert/config.js';
export { decodeParams, encodeParams, encodeParamsPieces, loadModel, saveModel } from './albert/checkpoint.js';
export type { Precision } from './albert/graph.js';
export { initAlbertParams } from './albert/params.js';
export type { AlbertBatch } from './batch.js';
export { missingCudaProvider } from './cuda-install.js';
export { planGpuMicroBatch, queryGpus, type GpuInfo } from './gpu-memory.js';
export { DynamicLossScaler, LOSS_SCALER_DEFAULTS, LossScaleError } from './loss-scaler.js';
export { formatBytes, planMicroBatch, type TrainingShape } from './memory-estimate.js';
export { encodeModel } from './onnx/encode.js';
export { Graph } from './onnx/graph.js';
export * from './optim/index.js';
export { OrtBackend } from './ort-backend.js';
export type { ProviderChoice } from './providers.js';
export type { ParameterSet } from './params.js';
export { Rng } from './rng.js';
export { syntheticBatch } from './synthetic.js';
export { scaledGradients, trainStep, type LocalStep } from './trainer.js';
export { WorkerBackend } from './worker-backend.js';
