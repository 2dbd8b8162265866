import assert from 'node:assert/strict';
import test from 'node:test';
import { encodeTrainingState, decodeTrainingState } from '../../src/collab/state.js';
import { checkConfig, PRESETS } from '../../src/engine/albert/config.js';
import { initAlbertParams } from '../../src/engine/albert/params.js';
import { createOptimizer } from '../../src/engine/optim/index.js';
import { runCli } from '../helpers/cli.js';

test('cohort run / status: a bad value exits 2 naming the flag and what is accepted', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['run', '--grad-compression', 'zip'], /--grad-compression.*none, fp16/],
    [['run', '--join', 'not-a-code'], /--join.*not a join code/],
    [['run', '--join', 'cohort:x', '--initial-peers', '/ip4/127.0.0.1/tcp/1/p2p/x'], /--join.*either/],
    [['run', '--initial-peers', '/ip4/127.0.0.1/tcp/1'], /--initial-peers.*\/p2p/],
    [['run', '--matchmaking-time', '10', '--averaging-expiration', '2'], /--averaging-expiration/],
    [['run', '--coordinator', '--client-mode'], /--coordinator/],
    [['run', '--target-batch-size', '0'], /--target-batch-size/],
    [['run', '--average-state-every', '0'], /--average-state-every.*integer from 1/],
    [['run', '--target-batch-size', '64', '--batch-size-lead', '64'], /--batch-size-lead.*from 0 to 63/],
    [['run', '--delay-optimizer-step', '--use-local-updates'], /--delay-optimizer-step.*--use-local-updates/],
    [['run', '--delay-grad-averaging', '--use-local-updates'], /--delay-grad-averaging.*--use-local-updates/],
    [['run', '--precision', 'fp8'], /--precision.*accepted: fp32, fp16/],
    [['run', '--upload-limit', '0'], /--upload-limit.*integer from 1/],
    [['run', '--adam-beta2', '1'], /--adam-beta2/],
    [['run', '--initial-peers', '/ip4/127.0.0.1/tcp/1', '--data-source', 'corpus.zip'], /--data-source.*joiner gets the run’s data/],
    [['run', '--data-source', 'corpus.zip', '--tokenizer', '/nonexistent/tokenizer.json'], /--tokenizer.*existing tokenizer\.json/],
    [['run', '--coordinator', '--cache-quota', '64'], /--cache-quota.*a coordinator serves the whole dataset/],
    [['run', '--cache-quota', '0'], /--cache-quota/],
    [['run', '--disk-reserve', '100'], /--disk-reserve.*the download of --data-source leaves free; give both/],
    [['run', '--data-source', 'corpus.zip', '--disk-reserve', 'lots'], /--disk-reserve/],
    [['status', '--join', 'nope'], /--join/],
    [['status', '--join', 'cohort:zzzz'], /--join: join code is too short; was it copied whole\?\n$/],
  ];
  for (const [args, message] of cases) {
    const r = await runCli([...args, '--data-dir', '/nonexistent/never-created']);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
  }
});

test('training state round-trips parameters, optimizer moments and epoch; a foreign blob is refused with its source named', () => {
  const config = checkConfig({ ...PRESETS.tiny, vocabSize: 64 });
  const params = initAlbertParams(config, 3);
  const optimizer = createOptimizer(params, { kind: 'lamb' });
  const grads = params.zerosLike();
  grads.data.fill(0.01);
  optimizer.step(params, grads, 0.001);
  const back = decodeTrainingState(encodeTrainingState({ epoch: 7, config, params, optimizer: optimizer.exportState() }), 'peer X');
  assert.equal(back.epoch, 7);
  assert.deepEqual(back.params.data, params.data);
  assert.deepEqual(back.optimizer!.expAvg.data, optimizer.exportState().expAvg.data);
  assert.equal(back.optimizer!.step, 1);
  assert.throws(() => decodeTrainingState(new Uint8Array([1, 2, 3]), 'peer Y'), /peer Y/);
});
