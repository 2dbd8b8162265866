import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOptimizer, decodeOptimizerState, encodeOptimizerState, OptimizerStateError, type OptimizerState } from '../../../src/engine/optim/index.js';
import { DynamicLossScaler } from '../../../src/engine/loss-scaler.js';
import { ParameterSet } from '../../../src/engine/params.js';
import { decodeSafetensors, encodeSafetensors, type SafeTensor } from '../../../src/engine/safetensors.js';

const LAYOUT = [
  { name: 'albert.pooler.weight', shape: [4, 3] },
  { name: 'albert.pooler.bias', shape: [4] },
  { name: 'predictions.decoder.bias', shape: [5] },
];

function gradsAt(step: number, params: ParameterSet): ParameterSet {
  const g = params.zerosLike();
  for (let i = 0; i < g.data.length; i++) g.data[i] = Math.sin(step * 7 + i) * (1 + (i % 3));
  return g;
}

function trained(kind: 'lamb' | 'adamw', steps: number): { params: ParameterSet; opt: ReturnType<typeof createOptimizer> } {
  const params = ParameterSet.allocate(LAYOUT);
  for (let i = 0; i < params.data.length; i++) params.data[i] = Math.cos(i) * 0.3;
  const opt = createOptimizer(params, { kind });
  for (let s = 0; s < steps; s++) opt.step(params, gradsAt(s, params), 0.01);
  return { params, opt };
}

test('state survives export → bytes → import: continuing after import equals continuing without', () => {
  for (const kind of ['lamb', 'adamw'] as const) {
    const { params, opt } = trained(kind, 3);
    const bytes = encodeOptimizerState(opt.exportState());
    const resumedParams = params.clone();
    const resumed = createOptimizer(resumedParams, { kind });
    resumed.importState(decodeOptimizerState(bytes, resumedParams));
    assert.equal(resumed.stepCount, 3);
    for (let s = 3; s < 6; s++) {
      opt.step(params, gradsAt(s, params), 0.01);
      resumed.step(resumedParams, gradsAt(s, resumedParams), 0.01);
    }
    assert.deepEqual(resumedParams.data, params.data, `${kind}: bit-identical after resuming`);
    // and a fresh optimizer (zero moments, step 0) does differ, so the state really mattered
    const { params: fresh } = trained(kind, 3);
    const restart = createOptimizer(fresh, { kind });
    for (let s = 3; s < 6; s++) restart.step(fresh, gradsAt(s, fresh), 0.01);
    assert.notDeepEqual(fresh.data, params.data);
  }
});

test('exportState(into) fills the sets given (no new ones) with what exportState() returns; a later export overwrites them', () => {
  const { params, opt } = trained('lamb', 2);
  const into = { expAvg: params.zerosLike(), expAvgSq: params.zerosLike() };
  const state = opt.exportState(into);
  assert.equal(state.expAvg, into.expAvg);
  assert.equal(state.expAvgSq, into.expAvgSq);
  const fresh = opt.exportState();
  assert.deepEqual(into.expAvg.data, fresh.expAvg.data);
  assert.deepEqual(into.expAvgSq.data, fresh.expAvgSq.data);
  assert.ok(into.expAvgSq.data.some((v) => v !== 0), 'the moments were copied, not left at zero');
  opt.step(params, gradsAt(2, params), 0.01);
  opt.exportState(into);
  assert.notDeepEqual(into.expAvg.data, fresh.expAvg.data, 'the second export overwrote the first');
  assert.equal(opt.exportState(into).step, 3);
});

test('the encoding names tensors exp_avg.<param>/exp_avg_sq.<param> and records kind, step and config', () => {
  const { opt } = trained('lamb', 2);
  const { tensors, metadata } = decodeSafetensors(encodeOptimizerState(opt.exportState()));
  assert.deepEqual([...tensors.keys()].sort(), LAYOUT.flatMap((s) => [`exp_avg.${s.name}`, `exp_avg_sq.${s.name}`]).sort());
  assert.deepEqual(tensors.get('exp_avg.albert.pooler.weight')!.shape, [4, 3]);
  assert.equal(metadata.kind, 'lamb');
  assert.equal(metadata.step, '2');
  assert.equal((JSON.parse(metadata.config!) as { clampValue: number }).clampValue, 10000);
  const exported = opt.exportState();
  exported.expAvg.data.fill(123);
  assert.notEqual(opt.exportState().expAvg.data[0], 123, 'exportState returns a copy');
});

test('bad state is refused with the tensor or field named', () => {
  const { opt } = trained('lamb', 1);
  const state = opt.exportState();
  const good = decodeSafetensors(encodeOptimizerState(state));
  const layout = ParameterSet.allocate(LAYOUT);
  const reencode = (edit: (t: Map<string, SafeTensor>, m: Record<string, string>) => void): Uint8Array => {
    const t = new Map(good.tensors);
    const m = { ...good.metadata };
    edit(t, m);
    return encodeSafetensors(t, m);
  };
  const expectError = (bytes: Uint8Array, pattern: RegExp): void => assert.throws(() => decodeOptimizerState(bytes, layout), (err: Error) => err instanceof OptimizerStateError && pattern.test(err.message));
  expectError(reencode((t) => t.delete('exp_avg_sq.albert.pooler.bias')), /no tensor exp_avg_sq\.albert\.pooler\.bias/);
  expectError(reencode((t) => t.set('exp_avg.predictions.decoder.bias', { dtype: 'F32', shape: [6], bytes: new Uint8Array(24) })), /exp_avg\.predictions\.decoder\.bias has shape \[6\], the parameter has \[5\]/);
  expectError(reencode((t) => t.set('exp_avg.extra', { dtype: 'F32', shape: [1], bytes: new Uint8Array(4) })), /tensor exp_avg\.extra, which matches no parameter/);
  expectError(reencode((_t, m) => (m.format = 'pt')), /not optimizer state/);
  expectError(reencode((_t, m) => (m.kind = 'sgd')), /kind "sgd" is unknown/);
  expectError(reencode((_t, m) => (m.step = '-1')), /step "-1"/);
  expectError(reencode((_t, m) => (m.version = '9')), /version "9" is not supported/);
  const infinite = new Float32Array([0, 0, Infinity, 0]);
  expectError(reencode((t) => t.set('exp_avg_sq.albert.pooler.bias', { dtype: 'F32', shape: [4], bytes: new Uint8Array(infinite.buffer) })), /exp_avg_sq\.albert\.pooler\.bias holds Infinity at element 2; moments must be finite numbers/);

  const adamw = createOptimizer(ParameterSet.allocate(LAYOUT), { kind: 'adamw' });
  assert.throws(() => adamw.importState(state), /state is for lamb, this optimizer is adamw/);
  const wider = createOptimizer(ParameterSet.allocate([...LAYOUT, { name: 'sop_classifier.classifier.bias', shape: [2] }]), { kind: 'lamb' });
  assert.throws(() => wider.importState(state), /exp_avg does not match the parameters: tensor sop_classifier\.classifier\.bias is missing/);
  const other = ParameterSet.allocate([LAYOUT[0]!, { name: 'albert.pooler.bias', shape: [2, 2] }, LAYOUT[2]!]);
  const foreign: OptimizerState = { ...state, expAvg: other, expAvgSq: other.zerosLike() };
  assert.throws(() => opt.importState(foreign), /tensor albert\.pooler\.bias has shape \[2, 2\], expected \[4\]/);
  assert.equal(opt.stepCount, 1, 'a refused import leaves the optimizer as it was');
});

test('fp16 training keeps its loss scaler state beside the moments; a bad one is refused', () => {
  const { opt } = trained('adamw', 1);
  const layout = ParameterSet.allocate(LAYOUT);
  const scaler = new DynamicLossScaler({ initScale: 2 ** 20, growthInterval: 10 });
  scaler.update(false);
  scaler.update(true);
  const decoded = decodeOptimizerState(encodeOptimizerState({ ...opt.exportState(), lossScaler: scaler.exportState() }), layout);
  const resumed = new DynamicLossScaler();
  resumed.importState(decoded.lossScaler!);
  assert.deepEqual(resumed.exportState(), { scale: 2 ** 19, growthFactor: 2, backoffFactor: 0.5, growthInterval: 10, growthTracker: 1, skippedSteps: 1 });
  assert.equal(decodeOptimizerState(encodeOptimizerState(opt.exportState()), layout).lossScaler, undefined, 'fp32 state has none');
  const { tensors, metadata } = decodeSafetensors(encodeOptimizerState({ ...opt.exportState(), lossScaler: scaler.exportState() }));
  const bad = encodeSafetensors(tensors, { ...metadata, loss_scaler: JSON.stringify({ ...scaler.exportState(), growthFactor: 0.5 }) });
  assert.throws(() => decodeOptimizerState(bad, layout), (err: Error) => err instanceof OptimizerStateError && /loss_scaler is invalid: loss scaler growthFactor 0\.5 is invalid/.test(err.message));
});
