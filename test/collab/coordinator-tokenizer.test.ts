// Coordinator checkpoints carry the run's tokenizer: real swarm nodes on loopback, a peer serving its
// state, the coordinator polled in-process, and `cohort model export` of what it saved.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { SWARM_STATE_CHECKPOINT } from '../../src/collab/full-state.js';
import { prepareDataset } from '../../src/data/prepare.js';
import { openStore } from '../../src/store/index.js';
import { cohortInProcess } from '../helpers/cli.js';
import { coordinatorWithDonorAtEpoch2 } from '../helpers/coordinator.js';
import { tmpDir } from '../helpers/tmp.js';

for (const prepared of [true, false]) {
  test(`a coordinator checkpoint ${prepared ? 'carries the tokenizer of the data prepared in its data directory, and exports whole' : 'goes without a tokenizer when no data is prepared, warned once'}`, { timeout: 120_000 }, async (t) => {
    const dataDir = tmpDir(t);
    const store = openStore(dataDir);
    const info = prepared ? (await prepareDataset({ store, dataDir, source: 'bundled', maxDocuments: 6, vocabSize: 1500, shardExamples: 25 })).info : undefined;
    const { coordinator, warnings } = await coordinatorWithDonorAtEpoch2(t, { runId: `coordinator-tokenizer-${prepared}`, dataDir, store, vocabSize: info?.vocabSize ?? 64 });
    t.after(() => store.close());

    await coordinator.poll();
    const [checkpoint] = store.checkpoints.list(SWARM_STATE_CHECKPOINT);
    assert.equal(checkpoint?.epoch, 2, warnings.join('\n'));
    const folder = path.join(dataDir, 'checkpoints', 'epoch-000002');
    if (!prepared) {
      assert.equal(checkpoint.meta['tokenizerSha256'], undefined);
      assert.equal(fs.existsSync(path.join(folder, 'tokenizer.json')), false);
      assert.deepEqual(warnings.filter((w) => w.startsWith('checkpoints carry no tokenizer')), ["checkpoints carry no tokenizer: this data directory has no prepared data with the model's vocabulary of 64 tokens (prepare the run's data here: cohort data prepare)"]);
      return;
    }
    assert.equal(checkpoint.meta['tokenizerSha256'], info!.tokenizerHash);
    assert.deepEqual(fs.readFileSync(path.join(folder, 'tokenizer.json')), fs.readFileSync(info!.tokenizerFile));
    // the tokenizer goes with the checkpoint even once the prepared data's copy is gone
    fs.rmSync(info!.tokenizerFile);
    const out = path.join(dataDir, 'export');
    const r = await cohortInProcess(['model', 'export', '--out', out, '--data-dir', dataDir]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(fs.readFileSync(path.join(out, 'tokenizer.json')), fs.readFileSync(path.join(folder, 'tokenizer.json')));
    assert.deepEqual(fs.readFileSync(path.join(out, 'model.safetensors')), fs.readFileSync(path.join(folder, 'model.safetensors')));
  });
}
