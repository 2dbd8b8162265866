import assert from 'node:assert/strict';
import test from 'node:test';
import type { SopExample } from '../../src/data/examples.js';
import { ShardFormatError, decodeShard, encodeShard } from '../../src/data/shard-format.js';

const examples: SopExample[] = [
  { a: [5, 6, 7], b: [8, 9], sop: 0 },
  { a: [10], b: [11, 12, 13, 14], sop: 1 },
  { a: [70000, 65535], b: [65536], sop: 1 },
];

test('shards round-trip with 2-byte ids for small vocabularies and 4-byte ids for large ones', () => {
  for (const [vocab, width, sample] of [[8000, 2, examples.slice(0, 2)], [100_000, 4, examples]] as const) {
    const { data, tokens } = encodeShard(sample, vocab);
    const view = decodeShard(data, sample.length, tokens);
    assert.equal(view.ids.BYTES_PER_ELEMENT, width);
    assert.ok(data.length < 16 + sample.length * 8 + tokens * width, 'compact: header, lengths, labels and ids only');
    sample.forEach((e, i) => {
      const start = view.offsets[i]!;
      const aLen = view.lengths[2 * i]!;
      assert.deepEqual([...view.ids.subarray(start, start + aLen)], e.a);
      assert.deepEqual([...view.ids.subarray(start + aLen, start + aLen + view.lengths[2 * i + 1]!)], e.b);
      assert.equal(view.sop[i], e.sop);
    });
  }
});

test('a shard that does not match its row or its own header is a ShardFormatError', () => {
  const { data, tokens } = encodeShard(examples.slice(0, 2), 8000);
  assert.throws(() => decodeShard(data, 3, tokens), ShardFormatError);
  assert.throws(() => decodeShard(data.subarray(0, data.length - 2), 2, tokens), /bytes, expected/);
  assert.throws(() => decodeShard(Buffer.from('not a shard at all'), 2, tokens), /no CDS1 header/);
  assert.throws(() => decodeShard(data.subarray(0, 8), 2, tokens), /shorter than its header/);
  const badLabel = Buffer.from(data);
  badLabel[16 + 8] = 7; // first SOP label
  assert.throws(() => decodeShard(badLabel, 2, tokens), /SOP label 7/);
});
