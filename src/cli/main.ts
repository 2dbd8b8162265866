// Entry point of the `cohort` command (see bin/cohort.js).
import { main } from './program.js';

process.exitCode = await main(process.argv.slice(2));
