import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { NodeController } from '../../src/node/controller.js';
import { startDashboardServer, type DashboardServer } from '../../src/node/dashboard-server.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: 'silent', logFormat: 'json' });
const TOKEN = 'test-token-0123456789abcdef';

/** A renderer build with one asset, next to a file that must never be served. */
function fakeRenderer(t: TestContext): string {
  const dir = tmpDir(t);
  const root = path.join(dir, 'renderer');
  fs.mkdirSync(path.join(root, 'assets'), { recursive: true });
  fs.writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>Cohort test page</title>');
  fs.writeFileSync(path.join(root, 'assets', 'app.js'), 'console.log(1)');
  fs.writeFileSync(path.join(root, 'assets', 'app.css'), 'body{}');
  fs.writeFileSync(path.join(dir, 'secret.txt'), 'do not serve');
  fs.symlinkSync(path.join(dir, 'secret.txt'), path.join(root, 'assets', 'link.txt'));
  return root;
}

async function serve(t: TestContext, token?: string): Promise<{ server: DashboardServer; controller: NodeController }> {
  const store = openStore(tmpDir(t));
  const controller = new NodeController({ store, log, version: '1.2.3', refreshMs: 60_000 });
  const server = await startDashboardServer({ host: '127.0.0.1', port: 0, token, rendererDir: fakeRenderer(t), api: controller, log });
  t.after(async () => {
    await server.close();
    await controller.close();
    store.close();
  });
  return { server, controller };
}

/** A raw request, so paths reach the server exactly as written (fetch would normalise `..`). */
function raw(url: string, pathname: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathname, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('serves the renderer with content types and security headers, and nothing outside it', async (t) => {
  const { server } = await serve(t);
  const index = await fetch(server.url);
  assert.equal(index.status, 200);
  assert.equal(index.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(index.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  assert.match(await index.text(), /Cohort test page/);
  assert.equal((await fetch(`${server.url}/assets/app.js`)).headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.equal((await fetch(`${server.url}/assets/app.css`)).headers.get('content-type'), 'text/css; charset=utf-8');
  for (const p of ['/../secret.txt', '/assets/../../secret.txt', '/%2e%2e/secret.txt', '/assets/%2e%2e%2f%2e%2e%2fsecret.txt', '/assets/..%5c..%5csecret.txt', '/assets/link.txt', '/%00']) {
    const r = await raw(server.url, p);
    assert.ok(r.status === 400 || r.status === 404, `${p} refused (got ${r.status})`);
    assert.doesNotMatch(r.body, /do not serve/);
  }
  assert.equal((await fetch(`${server.url}/missing.js`)).status, 404);
});

test('without a token only loopback Host names are answered (DNS rebinding)', async (t) => {
  const { server } = await serve(t);
  assert.equal((await raw(server.url, '/api/getSnapshot', { host: 'evil.example:80' })).status, 403);
  assert.equal((await raw(server.url, '/api/getSnapshot', { host: `localhost:${new URL(server.url).port}` })).status, 200);
});

test('the API follows the shared method table: verbs, JSON bodies, validation errors naming the field', async (t) => {
  const { server } = await serve(t);
  const snap = (await (await fetch(`${server.url}/api/getSnapshot`)).json()) as { version: string; contribution: { phase: string } };
  assert.equal(snap.version, '1.2.3');
  assert.equal(snap.contribution.phase, 'stopped');
  const post = (method: string, body?: string, type = 'application/json') => fetch(`${server.url}/api/${method}`, { method: 'POST', headers: { 'content-type': type }, body });
  const started = (await (await post('startContribution')).json()) as { ok: boolean; value: { phase: string } };
  assert.deepEqual([started.ok, started.value.phase], [true, 'running']);
  assert.equal((await fetch(`${server.url}/api/startContribution`)).status, 405, 'a mutation is never a GET');
  assert.equal((await post('startContribution', '', 'text/plain')).status, 415, 'cross-site simple requests are refused');
  assert.equal((await post('getLogs', '{nope')).status, 400);
  const bad = await post('updateSettings', JSON.stringify({ policies: { maxCpuThreads: 0 } }));
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: string }).error, /policies\.maxCpuThreads/);
  const unknownKey = await post('updateSettings', JSON.stringify({ nonsense: true }));
  assert.equal(unknownKey.status, 400);
  assert.equal((await post('noSuchMethod', '{}')).status, 404);
  assert.equal((await post('getLogs', 'x'.repeat(70_000))).status, 413);
  const saved = (await (await post('updateSettings', JSON.stringify({ policies: { maxCpuThreads: 3 } }))).json()) as { ok: boolean; value: { policies: { maxCpuThreads: number } } };
  assert.equal(saved.value.policies.maxCpuThreads, 3);
  const settings = (await (await fetch(`${server.url}/api/getSettings`)).json()) as { policies: { maxCpuThreads: number } };
  assert.equal(settings.policies.maxCpuThreads, 3);
});

test('Server-Sent Events push a snapshot on connect and on every change', async (t) => {
  const { server, controller } = await serve(t);
  const ac = new AbortController();
  t.after(() => ac.abort());
  const res = await fetch(`${server.url}/api/events`, { signal: ac.signal });
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const reader = (res.body as ReadableStream<Uint8Array>).getReader(); // fetch types its body ReadableStream<any>
  const phases: string[] = [];
  let buffer = '';
  const deadline = Date.now() + 10_000;
  while (phases.length < 2 && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += Buffer.from(value).toString();
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = /^event: snapshot\ndata: (.*)$/s.exec(frame);
      if (data) {
        phases.push((JSON.parse(data[1]!) as { contribution: { phase: string } }).contribution.phase);
        if (phases.length === 1) await controller.startContribution();
      }
    }
  }
  assert.deepEqual(phases, ['stopped', 'running']);
});

test('with a token every request needs it; ?token= sets an HttpOnly cookie and leaves the address bar', async (t) => {
  const { server } = await serve(t, TOKEN);
  assert.equal((await fetch(`${server.url}/api/getSnapshot`)).status, 401);
  assert.equal((await fetch(server.url)).status, 401);
  assert.equal((await fetch(`${server.url}/api/getSnapshot`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status, 401);
  assert.equal((await fetch(`${server.url}/api/getSnapshot`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
  const first = await fetch(`${server.url}/?token=${TOKEN}`, { redirect: 'manual' });
  assert.equal(first.status, 303);
  assert.equal(first.headers.get('location'), '/');
  const cookie = first.headers.get('set-cookie') ?? '';
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Strict/);
  const page = await fetch(server.url, { headers: { cookie: cookie.split(';')[0]! } });
  assert.equal(page.status, 200);
  // with a token the Host check is the token's job: a LAN address must work
  assert.equal((await raw(server.url, '/api/getSnapshot', { host: '192.0.2.10:7870', authorization: `Bearer ${TOKEN}` })).status, 200);
});
