import type { Command } from 'commander';
import type { CheckResult } from '../../doctor/checks.js';
import { addSettingOptions, commandContext } from '../context.js';
import { CommandExit } from '../failure.js';

const MARK: Record<CheckResult['status'], string> = { ok: 'ok     ', missing: 'missing', warn: 'warn   ', fail: 'FAIL   ' };

export function registerDoctor(program: Command): void {
  const cmd = program
    .command('doctor')
    .description('check what this machine has for Cohort (Node, Electron, onnxruntime providers, GPU, SQLite, disk, peers) and how to fix what is missing')
    .option('--json', 'print the checks as one JSON object')
    .option('--gpu', 'also run one tiny training step on CUDA and on the CPU and compare loss and gradients (reported as missing where there is no CUDA provider)');
  addSettingOptions(cmd, ['initialPeers']);
  cmd.action(async (opts: { json?: boolean; gpu?: boolean }) => {
    const { config } = commandContext(cmd);
    const [{ runChecks }, { checkGpuTrainingStep }] = await Promise.all([import('../../doctor/checks.js'), import('../../doctor/gpu-step.js')]);
    const results = [...(await runChecks(config)), ...(opts.gpu ? [await checkGpuTrainingStep()] : [])];
    const failed = results.filter((r) => r.status === 'fail');
    if (opts.json) {
      process.stdout.write(JSON.stringify({ ok: failed.length === 0, checks: results }) + '\n');
    } else {
      for (const r of results) {
        process.stdout.write(`${MARK[r.status]}  ${r.name}: ${r.detail}\n`);
        if (r.fix && r.status !== 'ok') process.stdout.write(`         fix: ${r.fix}\n`);
      }
      process.stdout.write(failed.length === 0 ? '\nCohort can run on this machine.\n' : `\n${failed.length} required check(s) failed.\n`);
    }
    if (failed.length > 0) throw new CommandExit(1);
  });
}
