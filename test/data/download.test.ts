import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import test, { type TestContext } from 'node:test';
import { download, downloadPath, type DownloadProgress } from '../../src/data/download.js';
import { tmpDir } from '../helpers/tmp.js';

const BODY = Buffer.from(Array.from({ length: 4000 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.\n`).join(''));
const SHA = createHash('sha256').update(BODY).digest('hex');

interface Served {
  readonly url: string;
  readonly ranges: (string | undefined)[];
}

/** A file server on 127.0.0.1 with Range support; `dropFirst` requests cut the connection half-way through the body. */
async function serve(t: TestContext, dropFirst: number): Promise<Served> {
  const ranges: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    if (req.url !== '/data/wiki.train.raw') {
      res.writeHead(404).end();
      return;
    }
    ranges.push(req.headers.range);
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const from = m ? Number(m[1]) : 0;
    if (from >= BODY.length) {
      res.writeHead(416, { 'Content-Range': `bytes */${BODY.length}` }).end();
      return;
    }
    const part = BODY.subarray(from);
    res.writeHead(m ? 206 : 200, { 'Content-Length': part.length, ...(m ? { 'Content-Range': `bytes ${from}-${BODY.length - 1}/${BODY.length}` } : {}) });
    if (ranges.length <= dropFirst) {
      res.write(part.subarray(0, Math.floor(part.length / 2)), () => res.socket?.destroy());
      return;
    }
    res.end(part);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/data/wiki.train.raw`, ranges };
}

/** Serves `handler` on 127.0.0.1 until the test ends; returns the URL of wiki.train.raw there. */
async function listen(t: TestContext, handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/wiki.train.raw`;
}

/** What an earlier attempt at `url` left in `dir`: a part holding `bytes`. */
function leavePart(url: string, dir: string, bytes: Uint8Array): string {
  const part = `${downloadPath(url, dir)}.part`;
  fs.mkdirSync(path.dirname(part), { recursive: true });
  fs.writeFileSync(part, bytes);
  return part;
}

test('a download whose connection drops half-way resumes with a Range request, completes and verifies', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 2);
  const progress: DownloadProgress[] = [];
  const file = await download(served.url, dir, { sha256: SHA, onProgress: (p) => progress.push(p) });
  assert.equal(file, downloadPath(served.url, dir));
  assert.ok(fs.readFileSync(file).equals(BODY));
  assert.equal(fs.existsSync(`${file}.part`), false);
  assert.equal(served.ranges[0], undefined);
  assert.match(served.ranges[1]!, /^bytes=\d+-$/);
  assert.ok(Number(/\d+/.exec(served.ranges[1]!)![0]) > 0, 'the second request resumes from the bytes already received');
  assert.equal(served.ranges.length, 3);
  assert.ok(progress.some((p) => p.attempt > 1));
  assert.equal(progress[progress.length - 1]!.received, BODY.length);
  assert.equal(progress[progress.length - 1]!.total, BODY.length);
});

test('a download that keeps failing is not taken as complete: the partial file stays for a later resume', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 3);
  await assert.rejects(download(served.url, dir, { sha256: SHA, attempts: 2 }), /failed after 2 attempts.*kept in/s);
  assert.equal(fs.existsSync(downloadPath(served.url, dir)), false);
  const kept = fs.statSync(`${downloadPath(served.url, dir)}.part`).size;
  assert.ok(kept > 0 && kept < BODY.length);
  // A later call resumes from the kept bytes and finishes.
  const file = await download(served.url, dir, { sha256: SHA });
  assert.ok(fs.readFileSync(file).equals(BODY));
  assert.equal(served.ranges[2], `bytes=${kept}-`);
});

test('a checksum mismatch is an error naming both hashes, and the bad file is removed', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 0);
  const wrong = 'ab'.repeat(32);
  await assert.rejects(download(served.url, dir, { sha256: wrong }), (err: Error) => err.message.includes(wrong) && err.message.includes(SHA) && /checksum mismatch/.test(err.message));
  assert.deepEqual(fs.readdirSync(path.dirname(downloadPath(served.url, dir))), []);
  await assert.rejects(download(served.url, dir, { sha256: 'xyz' }), /not 64 hex digits/);
});

test('an HTTP error status is a clear error', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 0);
  await assert.rejects(download(served.url.replace('wiki.train.raw', 'missing'), dir), /HTTP 404/);
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('a server that refuses the connection is an error saying so, not only "fetch failed"', async (t) => {
  const dir = tmpDir(t);
  // a port that was just free: nothing listens on it
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await assert.rejects(download(`http://127.0.0.1:${port}/wiki.train.raw`, dir, { attempts: 1 }), /failed after 1 attempts .*fetch failed: .*ECONNREFUSED/);
});

test('two URLs ending in the same file name never take each other\'s file or resume each other\'s part', async (t) => {
  const dir = tmpDir(t);
  const bodies: Record<string, Buffer> = { '/a/corpus.txt': BODY, '/b/corpus.txt': Buffer.from(BODY.toString().toUpperCase()) };
  let cut = true;
  const server = http.createServer((req, res) => {
    const body = bodies[req.url ?? '']!;
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    const part = body.subarray(from);
    res.writeHead(from > 0 ? 206 : 200, { 'Content-Length': part.length, ...(from > 0 ? { 'Content-Range': `bytes ${from}-${body.length - 1}/${body.length}` } : {}) });
    if (cut) res.write(part.subarray(0, part.length >> 1), () => res.socket?.destroy());
    else res.end(part);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = (p: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}${p}`;
  // /a is cut short and its part kept; /b downloads whole, from its own first byte
  await assert.rejects(download(url('/a/corpus.txt'), dir, { attempts: 1 }), /failed after 1 attempts/);
  cut = false;
  assert.ok(fs.readFileSync(await download(url('/b/corpus.txt'), dir)).equals(bodies['/b/corpus.txt']!));
  // /a resumes its own part; and each URL then finds its own complete file
  assert.ok(fs.readFileSync(await download(url('/a/corpus.txt'), dir)).equals(BODY));
  assert.ok(fs.readFileSync(await download(url('/b/corpus.txt'), dir)).equals(bodies['/b/corpus.txt']!));
});

test('what onProgress throws (a stop the caller asked for) ends the download at once, not retried, and the part stays', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 0);
  const stop = new Error('stopped by the caller');
  await assert.rejects(
    download(served.url, dir, {
      onProgress: () => {
        throw stop;
      },
    }),
    (err) => err === stop,
  );
  assert.equal(served.ranges.length, 1);
  assert.ok(fs.existsSync(`${downloadPath(served.url, dir)}.part`));
});

test('a part longer than the file the server now has (a changed file) is not taken as complete: the download starts again', async (t) => {
  const dir = tmpDir(t);
  const served = await serve(t, 0);
  const part = `${downloadPath(served.url, dir)}.part`;
  fs.mkdirSync(path.dirname(part), { recursive: true });
  fs.writeFileSync(part, Buffer.concat([Buffer.from('an older, longer version of the file. '), BODY]));
  const file = await download(served.url, dir);
  assert.ok(fs.readFileSync(file).equals(BODY));
  assert.deepEqual(served.ranges, [`bytes=${BODY.length + 38}-`, undefined]);
});

test('a part is resumed only while the server has the same version of the file (If-Range): a changed file is downloaded whole', async (t) => {
  const dir = tmpDir(t);
  const versions = [BODY, Buffer.from(BODY.toString().toUpperCase())];
  let version = 0;
  const requests: { range?: string; ifRange?: string }[] = [];
  // honours If-Range as HTTP servers do: the Range only when the validator names the current version
  const server = http.createServer((req, res) => {
    const ifRange = req.headers['if-range'] as string | undefined;
    requests.push({ range: req.headers.range, ifRange });
    const body = versions[version]!;
    const etag = `"v${version}"`;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const from = m && (ifRange === undefined || ifRange === etag) ? Number(m[1]) : 0;
    const part = body.subarray(from);
    res.writeHead(from > 0 ? 206 : 200, { ETag: etag, 'Content-Length': part.length, ...(from > 0 ? { 'Content-Range': `bytes ${from}-${body.length - 1}/${body.length}` } : {}) });
    if (requests.length === 1) res.write(part.subarray(0, part.length >> 1), () => res.socket?.destroy());
    else res.end(part);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/wiki.train.raw`;
  await assert.rejects(download(url, dir, { attempts: 1 }), /failed after 1 attempts/);
  version = 1;
  assert.ok(fs.readFileSync(await download(url, dir)).equals(versions[1]!));
  assert.equal(requests[1]!.ifRange, '"v0"');
  assert.deepEqual(fs.readdirSync(path.dirname(downloadPath(url, dir))), ['wiki.train.raw']);
});

test('a 206 whose Content-Range does not start at the part\'s end is not appended: the download starts again', async (t) => {
  const dir = tmpDir(t);
  const ranges: (string | undefined)[] = [];
  // a server that answers every Range with the whole file as a 206
  const url = await listen(t, (req, res) => {
    ranges.push(req.headers.range);
    res.writeHead(req.headers.range ? 206 : 200, { 'Content-Length': BODY.length, ...(req.headers.range ? { 'Content-Range': `bytes 0-${BODY.length - 1}/${BODY.length}` } : {}) }).end(BODY);
  });
  leavePart(url, dir, BODY.subarray(0, 1000));
  assert.ok(fs.readFileSync(await download(url, dir)).equals(BODY));
  assert.deepEqual(ranges, ['bytes=1000-', undefined]);
});

test('a server trickling bytes (never idle, far under the rate floor) is left, resumed, and after the attempts the download fails naming the rate', { timeout: 60_000 }, async (t) => {
  const dir = tmpDir(t);
  let requests = 0;
  const timers = new Set<NodeJS.Timeout>();
  // announces the whole file, then sends one byte every 20 ms: never idle for the 1 s idle timeout
  const url = await listen(t, (req, res) => {
    requests++;
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    res.writeHead(from > 0 ? 206 : 200, { 'Content-Length': BODY.length - from, ...(from > 0 ? { 'Content-Range': `bytes ${from}-${BODY.length - 1}/${BODY.length}` } : {}) });
    let at = from;
    const timer = setInterval(() => {
      if (res.destroyed || at >= BODY.length) return clearInterval(timer);
      res.write(BODY.subarray(at, ++at));
    }, 20);
    timers.add(timer);
    res.on('close', () => clearInterval(timer));
  });
  t.after(() => timers.forEach((timer) => clearInterval(timer)));
  await assert.rejects(
    download(url, dir, { attempts: 2, idleTimeoutMs: 1000, minBytesPerSecond: 1000 }),
    /failed after 2 attempts \(\d+ bytes kept in .*\.part for a later resume\): the server sent \d+ bytes in [\d.]+ s \([\d.]+ B\/s\), under the floor of 1000 B\/s/,
  );
  assert.equal(requests, 2, 'the second attempt resumed');
  const kept = fs.statSync(`${downloadPath(url, dir)}.part`).size;
  assert.ok(kept > 0 && kept < BODY.length);
  assert.ok(fs.readFileSync(`${downloadPath(url, dir)}.part`).equals(BODY.subarray(0, kept)), 'the bytes kept are the file\'s start');
});

test('a server sending more bytes than the size it announced is refused: nothing past the size is written, the part is deleted, no retry', async (t) => {
  const dir = tmpDir(t);
  const ranges: (string | undefined)[] = [];
  // a 206 whose Content-Range names the file's size, its body (chunked, no length) the rest and 1 MiB more
  const url = await listen(t, (req, res) => {
    ranges.push(req.headers.range);
    const from = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    res.writeHead(206, { 'Content-Range': `bytes ${from}-${BODY.length - 1}/${BODY.length}` });
    res.end(Buffer.concat([BODY.subarray(from), Buffer.alloc(1 << 20, 0x41)]));
  });
  const part = leavePart(url, dir, BODY.subarray(0, 1000));
  await assert.rejects(download(url, dir), new RegExp(`GET ${url}: the server sent more than the ${BODY.length} bytes it announced \\(Content-Range\\); the partial file was deleted`));
  assert.deepEqual(ranges, ['bytes=1000-']);
  assert.deepEqual(fs.readdirSync(path.dirname(part)), []);
});

test('a server sending a body with no length is cut where the disk would keep less than the reserve free: the part is deleted, no retry', { timeout: 60_000 }, async (t) => {
  const dir = tmpDir(t);
  let requests = 0;
  let sent = 0;
  // chunked, no length, 256 MiB of it while the client reads
  const url = await listen(t, (_req, res) => {
    requests++;
    res.writeHead(200);
    const chunk = Buffer.alloc(1 << 16, 0x41);
    const more = (): void => {
      while (sent < 256 * 2 ** 20) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  const disk = fs.statfsSync(dir);
  // leaves this download about 1 MiB of the disk (less if other processes write meanwhile)
  const reserveBytes = disk.bavail * disk.bsize - 2 ** 20;
  await assert.rejects(download(url, dir, { reserveBytes }), new RegExp(`GET ${url}: the server sent more than -?\\d+ bytes \\(the disk holding .* has \\d+ bytes free, ${reserveBytes} of them kept free\\), with no length announced; the partial file was deleted`));
  assert.equal(requests, 1);
  assert.deepEqual(fs.readdirSync(path.dirname(downloadPath(url, dir))), []);
});

test('a file larger than the disk can take with the reserve kept free is refused before any byte is written', async (t) => {
  const dir = tmpDir(t);
  const size = 64 * 2 ** 20;
  const url = await listen(t, (_req, res) => res.writeHead(200, { 'Content-Length': size }).end(Buffer.alloc(size)));
  const disk = fs.statfsSync(dir);
  // leaves this download about 1 MiB of the disk
  const reserveBytes = disk.bavail * disk.bsize - 2 ** 20;
  await assert.rejects(download(url, dir, { reserveBytes }), new RegExp(`GET ${url}: the file is ${size} bytes, ${size} of them still to download, more than -?\\d+ bytes \\(the disk holding .* has \\d+ bytes free, ${reserveBytes} of them kept free\\)$`));
  assert.equal(fs.existsSync(`${downloadPath(url, dir)}.part`), false);
});
