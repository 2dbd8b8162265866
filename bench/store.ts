// Checkpoint throughput of the SQLite store against writing the same bytes to a plain file with
// fsync, in the same run. Size defaults to ALBERT-large's fp32 weights (≈72 MB); `-- <MiB>` to change.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openStore } from '../src/store/index.js';
import { median, reportJson } from './_report.js';

const mib = Number(process.argv[2] ?? 72);
if (!Number.isFinite(mib) || mib <= 0) throw new Error(`size must be a positive number of MiB, got ${process.argv[2]}`);
const bytes = new Uint8Array(mib * 1024 * 1024).map((_, i) => (i * 2654435761) >>> 24);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-store-'));
const rounds = 5;

try {
  const store = openStore(dir);
  const save: number[] = [];
  const load: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < rounds; i++) {
    let t = performance.now();
    const info = store.checkpoints.save({ kind: 'model', epoch: i, data: bytes, keep: 2 });
    store.db.pragma('wal_checkpoint(TRUNCATE)'); // count the copy into the main file, as a crash-safe write must
    save.push(performance.now() - t);
    t = performance.now();
    store.checkpoints.load(info.id);
    load.push(performance.now() - t);
    t = performance.now();
    const file = path.join(dir, `raw-${i}.bin`);
    const fd = fs.openSync(file, 'w');
    fs.writeSync(fd, bytes);
    fs.writeSync(fd, createHash('sha256').update(bytes).digest()); // the same hashing work as the store
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    raw.push(performance.now() - t);
    fs.rmSync(file);
  }
  store.close();
  const mbps = (ms: number) => mib / (ms / 1000);
  const [s, l, r] = [median(save), median(load), median(raw)];
  console.log(`checkpoint of ${mib} MiB, median of ${rounds}:`);
  console.log(`  store save  ${s.toFixed(0)} ms (${mbps(s).toFixed(0)} MiB/s)`);
  console.log(`  store load  ${l.toFixed(0)} ms (${mbps(l).toFixed(0)} MiB/s, checksum verified)`);
  console.log(`  plain file  ${r.toFixed(0)} ms (${mbps(r).toFixed(0)} MiB/s, write + sha256 + fsync)`);
  console.log(`  save ÷ plain file: ${(s / r).toFixed(2)}×`);
  reportJson({ mib, save_ms: Math.round(s), load_ms: Math.round(l), raw_ms: Math.round(r), save_vs_raw: Number((s / r).toFixed(3)) });
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
