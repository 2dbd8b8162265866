import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/load.js';
import { DataError } from '../data/errors.js';
import { StoreError } from '../store/errors.js';
import { ModelExportError, NonFiniteTrainingError, RunDataError } from '../training/errors.js';
import { RunRecordUnavailableError } from '../collab/errors.js';
import { ListenError } from '../node/http-server.js';
import { IdentityError, SwarmListenError, SwarmUnreachableError } from '../swarm/errors.js';
import { registerData } from './commands/data.js';
import { registerRun } from './commands/run.js';
import { registerStatus } from './commands/status.js';
import { registerDoctor } from './commands/doctor.js';
import { registerModel } from './commands/model.js';
import { registerStart } from './commands/start.js';
import { registerTrain } from './commands/train.js';
import { registerSwarm } from './commands/swarm.js';
import { registerMetrics } from './commands/metrics.js';
import { GLOBAL_SETTINGS, addSettingOptions, originOf } from './context.js';
import { CommandExit, CommandFailure } from './failure.js';
import { OutputWriteError } from '../util/output-path.js';

// The command modules import only their flag tables and the schemas under them; each action loads
// the runtime it drives (swarm, engine, store) with `await import()` once its flags are read, so
// --help, a bad flag or a bad value costs no libp2p, onnxruntime or SQLite (test/cli/startup.test.ts).

/** Exit codes: 0 success, 1 failure at run time, 2 bad usage (unknown flag, bad value, bad config). */
const EXIT_USAGE = 2;

/** Failures whose message names what went wrong and what to do: printed as that one line, without a stack. */
const EXPECTED_FAILURES = [StoreError, DataError, NonFiniteTrainingError, RunRecordUnavailableError, SwarmUnreachableError, SwarmListenError, ListenError, IdentityError, ModelExportError, RunDataError, OutputWriteError, CommandFailure];

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

export function buildProgram(): Command {
  const program = new Command('cohort')
    .description('Cohort: train ALBERT together with volunteers over the internet (headless node and tools)')
    .version(version, '-V, --version')
    .option('-c, --config <file>', 'JSON config file (env COHORT_CONFIG; default ./cohort.config.json if present). Precedence: flags > COHORT_* env > config file > defaults')
    .showHelpAfterError('(run with --help for the accepted flags and values)')
    .exitOverride();
  addSettingOptions(program, GLOBAL_SETTINGS);
  registerDoctor(program);
  registerData(program);
  registerRun(program);
  registerStatus(program);
  registerStart(program);
  registerModel(program);
  registerTrain(program);
  registerSwarm(program);
  registerMetrics(program);
  for (const cmd of program.commands) cmd.exitOverride().showHelpAfterError('(run with --help for the accepted flags and values)');
  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  let invoked: Command | undefined;
  try {
    const program = buildProgram();
    program.hook('preAction', (_program, action) => void (invoked = action));
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommandExit) return err.code;
    if (err instanceof CommanderError) {
      // commander already printed its message; help and version are successful exits
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? 0 : EXIT_USAGE;
    }
    if (err instanceof ConfigError) {
      const origin = invoked && originOf(invoked, err.source);
      process.stderr.write(`cohort: ${origin ? `${origin} (${err.message})` : err.message}\n`);
      return EXIT_USAGE;
    }
    // the message says all: what went wrong and what to do (an expected failure: bad input, no dataset, an unreachable swarm)
    if (err instanceof Error && EXPECTED_FAILURES.some((Class) => err instanceof Class)) {
      process.stderr.write(`cohort: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`cohort: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}

