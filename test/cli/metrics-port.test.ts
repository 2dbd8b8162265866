// `--metrics-port` on the commands servers run: a real `cohort swarm start` and `cohort run
// --coordinator` serve /metrics (their node's metrics plus process metrics) that a strict parser of the
// exposition format accepts, behind the dashboard's access rule.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { parseFlags } from '../../src/cli/flag-table.js';
import { metricsEndpoint } from '../../src/cli/metrics-endpoint.js';
import { buildProgram } from '../../src/cli/program.js';
import { RUN_FLAGS } from '../../src/cli/run-flags.js';
import { ConfigError } from '../../src/config/load.js';
import { CLI, runCli, startProcess } from '../helpers/cli.js';
import { metricsUrl, scrape } from '../helpers/prometheus.js';
import { tmpDir } from '../helpers/tmp.js';

const TOKEN = 'scrape-token-0123456789abcdef';
test('cohort run --coordinator --metrics-port serves the swarm, training and process metrics, behind the token', async (t) => {
  const proc = startProcess(t, [CLI, 'run', '--coordinator', '--run-id', 'metrics-demo', '--listen', '/ip4/127.0.0.1/tcp/0', '--data-dir', tmpDir(t), '--metrics-port', '0', '--metrics-token', TOKEN]);
  const url = await metricsUrl(proc);
  assert.equal((await fetch(url)).status, 401, 'no token, no metrics');
  assert.equal((await fetch(url.replace('/metrics', '/api/getSnapshot'), { headers: { authorization: `Bearer ${TOKEN}` } })).status, 404, 'only /metrics is served');
  const families = await scrape(url, TOKEN);
  assert.equal(families.get('cohort_swarm_connected_peers')?.type, 'gauge');
  assert.deepEqual(families.get('cohort_swarm_reachability')?.samples.map((s) => s.labels.state).sort(), ['private', 'public', 'unknown']);
  assert.equal(families.get('cohort_training_target_batch_size')?.type, 'gauge', 'the coordinator’s training view');
  assert.equal(families.get('cohort_contribution_credited_samples_total')?.type, 'counter');
  assert.ok((families.get('process_cpu_seconds_total')?.samples[0]?.value ?? 0) > 0, 'process metrics');
  assert.equal(families.get('nodejs_gc_duration_seconds')?.type, 'histogram');
  assert.equal(await proc.stop(), 0, proc.out());
});

test('cohort swarm start takes --metrics-port from COHORT_METRICS_PORT and serves on loopback without a token; the URL is on stdout under --log-level warn', async (t) => {
  // an operator who quiets the log still learns which port 0 picked
  const proc = startProcess(t, [CLI, 'swarm', 'start', '--run-id', 'metrics-swarm', '--host-maddrs', '/ip4/127.0.0.1/tcp/0', '--data-dir', tmpDir(t), '--log-level', 'warn'], { env: { COHORT_METRICS_PORT: '0' } });
  const url = await metricsUrl(proc);
  const families = await scrape(url, 'unused-without-a-token');
  assert.equal(families.get('cohort_swarm_routing_table_size')?.samples[0]?.value, 0);
  assert.ok(families.has('process_resident_memory_bytes'));
  assert.equal(families.has('cohort_training_epoch'), false, 'a swarm peer has no training view');
  // fetch() does not send a Host header of its own choosing; node:http does
  const foreign = await new Promise<number | undefined>((resolve, reject) => http.get(url, { headers: { host: 'evil.example' } }, (res) => resolve(res.resume().statusCode)).on('error', reject));
  assert.equal(foreign, 403, 'a rebound DNS name is refused as on the dashboard');
  assert.equal(await proc.stop(), 0, proc.out());
});

/** The metrics server `cohort run <args>` asks for. */
function endpoint(args: readonly string[]): ReturnType<typeof metricsEndpoint> {
  const cmd = buildProgram().commands.find((c) => c.name() === 'run')!;
  cmd.parseOptions([...args]);
  return metricsEndpoint(parseFlags(cmd, RUN_FLAGS));
}

test('metrics flags: the port range, the token rule and the loopback rule, each naming its flag', () => {
  assert.equal(endpoint([]), undefined, 'no --metrics-port: nothing served');
  assert.deepEqual(endpoint(['--metrics-port', '9464']), { port: 9464, host: '127.0.0.1', token: undefined });
  assert.deepEqual(endpoint(['--metrics-port', '0', '--metrics-host', '0.0.0.0', '--metrics-token', TOKEN]), { port: 0, host: '0.0.0.0', token: TOKEN });
  const refusals: Array<[string[], RegExp]> = [
    [['--metrics-port', '70000'], /^--metrics-port: .*integer from 0 to 65535/],
    [['--metrics-port', '0', '--metrics-host', '0.0.0.0'], /^--metrics-host: .*beyond loopback needs an access token; pass --metrics-token/],
    [['--metrics-port', '0', '--metrics-token', 'short'], /^--metrics-token: .*16 to 256 printable/],
    [['--metrics-token', TOKEN], /^--metrics-token: needs --metrics-port/],
  ];
  for (const [args, message] of refusals) assert.throws(() => endpoint(args), (err: unknown) => err instanceof ConfigError && message.test(err.message), args.join(' '));
});

test('a bad metrics flag exits 2 naming the flag or the variable it came from', async () => {
  const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
    [['run', '--metrics-port', '0', '--metrics-host', '0.0.0.0'], {}, /--metrics-host.*beyond loopback needs an access token/],
    [['swarm', 'start', '--run-id', 'r'], { COHORT_METRICS_PORT: 'x' }, /COHORT_METRICS_PORT.*integer from 0 to 65535/],
  ];
  for (const [args, env, message] of cases) {
    const r = await runCli([...args, '--data-dir', '/nonexistent/never-created'], { env });
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
  }
});
