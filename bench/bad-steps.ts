/**
 * What surviving bad steps costs a training peer (docs/collab.md, "Bad steps"): the finiteness check of
 * every micro-batch's gradient (its global norm), the check of the parameters after every optimizer
 * step, and an in-memory backup (parameters + LAMB moments, every --backup-every-steps epochs), each
 * beside one LAMB step for scale. Usage: npm run bench -- bad-steps [--preset tiny|base|large] [--rounds N]
 */
import { PRESETS } from '../src/engine/albert/config.js';
import { initAlbertParams } from '../src/engine/albert/params.js';
import { clipGradNorm, createOptimizer, gradNorm } from '../src/engine/optim/index.js';
import { countArg, presetArg } from './_args.js';
import { median, reportJson } from './_report.js';

const preset = presetArg('--preset', 'large');
const rounds = countArg('--rounds', 5, 1000);

const params = initAlbertParams(PRESETS[preset], 0);
const optimizer = createOptimizer(params, { kind: 'lamb' });
const grads = params.zerosLike();
grads.data.set(initAlbertParams(PRESETS[preset], 1).data);
const backup = params.data.slice();
const moments = { expAvg: params.zerosLike(), expAvgSq: params.zerosLike() };
const time = (f: () => unknown): number => {
  const t = performance.now();
  f();
  return performance.now() - t;
};
const times = { guard: [] as number[], check: [] as number[], backup: [] as number[], lamb: [] as number[] };
for (let r = 0; r < rounds; r++) {
  times.guard.push(time(() => gradNorm(grads)));
  times.lamb.push(
    time(() => {
      clipGradNorm(grads, 1);
      optimizer.step(params, grads, 1e-4);
    }),
  );
  times.check.push(time(() => Number.isFinite(gradNorm(params))));
  times.backup.push(
    time(() => {
      backup.set(params.data);
      optimizer.exportState(moments); // as the peer's backup does: into the previous backup's buffers
    }),
  );
}
const m = { guard: median(times.guard), check: median(times.check), backup: median(times.backup), lamb: median(times.lamb) };
console.log(`${preset} ALBERT, ${params.size} parameters, median of ${rounds} rounds:`);
console.log(`  gradient finiteness check per micro-batch  ${m.guard.toFixed(1)} ms`);
console.log(`  parameter check per optimizer step         ${m.check.toFixed(1)} ms`);
console.log(`  in-memory backup (params + LAMB moments)   ${m.backup.toFixed(1)} ms, ${((3 * 4 * params.size) / 2 ** 20).toFixed(0)} MiB held`);
console.log(`  one LAMB step (clip + update), for scale   ${m.lamb.toFixed(1)} ms`);
reportJson({ preset, parameters: params.size, grad_check_ms: m.guard, param_check_ms: m.check, backup_ms: m.backup, backup_mib: (3 * 4 * params.size) / 2 ** 20, lamb_step_ms: m.lamb });
