import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import type { Config } from '../config/settings.js';
import { missingCudaProvider } from '../engine/index.js';
import { decodeJoinCode, soleJoinCode } from '../swarm/join-code.js';
import { electronBinary, type ElectronBinary } from './electron.js';
import { onnxruntimeVersion, probeProvider } from './ort-probe.js';

const localRequire = createRequire(import.meta.url);

export type CheckStatus = 'ok' | 'missing' | 'warn' | 'fail';

/** One line of `cohort doctor`: what was found, and how to fix it when it is not ok. */
export interface CheckResult {
  readonly name: string;
  readonly status: CheckStatus;
  readonly detail: string;
  readonly fix?: string;
}

const MIN_NODE = [20, 19] as const;

function checkNode(version = process.versions.node): CheckResult {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const ok = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
  if (!ok) return { name: 'Node.js', status: 'fail', detail: `${version} (Cohort needs >= ${MIN_NODE.join('.')})`, fix: 'install Node.js 22 LTS (or >= 20.19) and run `npm ci` again' };
  const note = major < 22 ? '; Promise.withResolvers is polyfilled for libp2p' : '';
  return { name: 'Node.js', status: 'ok', detail: `${version}${note}` };
}

export function checkElectron(electron: ElectronBinary = electronBinary()): CheckResult {
  if (electron.found) return { name: 'Electron', status: 'ok', detail: electron.path };
  // the npm package (a server's `npm install --global`) has no electron: there is no checkout to `npm ci` in
  const fix = electron.packageMissing
    ? 'the npm package is the headless node, without the desktop window: `cohort start` serves the dashboard in your browser; the desktop app comes as an installer, or from a checkout with `npm ci`'
    : 'on a machine that can reach the Electron download site run `npm ci` again (or `npx install-electron`); meanwhile `npm start` runs the headless node and serves the dashboard in your browser';
  return { name: 'Electron', status: 'missing', detail: electron.reason, fix };
}

async function checkOnnxRuntime(): Promise<CheckResult[]> {
  const version = onnxruntimeVersion();
  if (!version) return [{ name: 'onnxruntime-node', status: 'fail', detail: 'not installed', fix: 'run `npm ci`' }];
  const cpu = await probeProvider('cpu');
  const results: CheckResult[] = [
    cpu.ok
      ? { name: 'onnxruntime-node', status: 'ok', detail: `${version}, CPU execution provider loads` }
      : { name: 'onnxruntime-node', status: 'fail', detail: `${version}, CPU provider failed: ${cpu.error}`, fix: 'reinstall with `npm ci`; check that the platform is supported (linux/darwin/win32, x64/arm64)' },
  ];
  const cuda = await probeProvider('cuda');
  results.push(
    cuda.ok
      ? { name: 'CUDA provider', status: 'ok', detail: 'loads; training will use the GPU' }
      : {
          name: 'CUDA provider',
          status: 'missing',
          // ORT's own error is a bare dlopen message; say which part is missing when that can be seen
          detail: `does not load: ${missingCudaProvider() ?? cuda.error}`,
          fix:
            process.platform === 'linux' && process.arch === 'x64'
              ? 'needs an NVIDIA driver, CUDA 12 + cuDNN 9 libraries, and the provider files: run `npm rebuild` on a machine that can reach NuGet (the CPU works meanwhile)'
              : 'the CUDA provider is offered for Linux x64 and Windows x64 only; the CPU provider is used',
        },
  );
  // shipped with onnxruntime-node itself: it needs only a GPU driver (and, on Linux, the Vulkan loader)
  const webgpu = await probeProvider('webgpu');
  results.push(
    webgpu.ok
      ? { name: 'WebGPU provider', status: 'ok', detail: 'an adapter loads; `--provider webgpu` trains on it in fp32 (a software adapter such as Mesa\'s lavapipe is slower than the CPU provider)' }
      : { name: 'WebGPU provider', status: 'missing', detail: `does not load: ${webgpu.error}`, fix: process.platform === 'linux' ? 'needs a GPU driver with Vulkan and the Vulkan loader (Debian/Ubuntu: `libvulkan1`)' : 'needs a GPU driver that offers WebGPU (D3D12 on Windows, Metal on macOS; checked on Linux only)' },
  );
  return results;
}

function checkGpu(): CheckResult {
  const r = spawnSync('nvidia-smi', ['--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'], { encoding: 'utf8', timeout: 5000 });
  if (r.error) return { name: 'GPU', status: 'missing', detail: (r.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no NVIDIA driver found (nvidia-smi is not installed)' : `nvidia-smi failed: ${r.error.message}`, fix: 'install the NVIDIA driver to train on a GPU; Cohort trains on the CPU otherwise' };
  if (r.status !== 0) return { name: 'GPU', status: 'missing', detail: `nvidia-smi exited ${r.status}: ${r.stderr.trim()}`, fix: 'check the NVIDIA driver installation' };
  const gpus = r.stdout.trim().split('\n').filter(Boolean);
  return { name: 'GPU', status: 'ok', detail: gpus.join('; ') };
}

function checkSqlite(): CheckResult {
  try {
    const Database = localRequire('better-sqlite3') as typeof import('better-sqlite3');
    const db = new Database(':memory:');
    const { v } = db.prepare('SELECT sqlite_version() AS v').get() as { v: string };
    db.close();
    return { name: 'SQLite', status: 'ok', detail: `${v} (better-sqlite3)` };
  } catch (err) {
    return { name: 'SQLite', status: 'fail', detail: `better-sqlite3 does not load: ${(err as Error).message.split('\n')[0]}`, fix: 'run `npm rebuild better-sqlite3` (needs python3, make and a C++ compiler when no prebuilt binary can be downloaded)' };
  }
}

/** Minimum free space worth warning about: a few large-preset checkpoints plus a data cache. */
const LOW_DISK_BYTES = 2 * 1024 ** 3;

function checkDataDir(dataDir: string): CheckResult {
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.accessSync(dataDir, fs.constants.W_OK);
    const stats = fs.statfsSync(dataDir);
    const free = stats.bavail * stats.bsize;
    const freeText = `${(free / 1024 ** 3).toFixed(1)} GiB free`;
    if (free < LOW_DISK_BYTES) return { name: 'Data directory', status: 'warn', detail: `${dataDir} (${freeText})`, fix: 'free some disk space or choose another --data-dir' };
    return { name: 'Data directory', status: 'ok', detail: `${dataDir} (${freeText})` };
  } catch (err) {
    return { name: 'Data directory', status: 'fail', detail: `${dataDir} is not writable: ${(err as Error).message}`, fix: 'choose a writable directory with --data-dir or COHORT_DATA_DIR' };
  }
}

/** host and TCP port of a multiaddr like /ip4/1.2.3.4/tcp/31337/p2p/…, or undefined if it has none. */
function tcpTarget(multiaddr: string): { host: string; port: number } | undefined {
  const m = /^\/(ip4|ip6|dns4|dns6|dns)\/([^/]+)\/tcp\/(\d+)(\/|$)/.exec(multiaddr);
  if (!m) return undefined;
  return { host: m[2]!, port: Number(m[3]) };
}

async function checkPeer(multiaddr: string, timeoutMs = 3000): Promise<CheckResult> {
  const name = `Peer ${multiaddr}`;
  const target = tcpTarget(multiaddr);
  if (!target) return { name, status: 'warn', detail: 'not a TCP multiaddr; reachability not tested', fix: 'use the form /ip4/<address>/tcp/<port>/p2p/<peer id>' };
  const error = await new Promise<string | undefined>((resolve) => {
    const socket = net.connect({ host: target.host, port: target.port });
    const done = (e?: string) => {
      socket.destroy();
      resolve(e);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`));
    socket.once('connect', () => done());
    socket.once('error', (e) => done(e.message));
  });
  if (error) return { name, status: 'warn', detail: `unreachable: ${error}`, fix: 'check the address, that the peer is running, and your firewall; peers behind NAT join with --client-mode' };
  return { name, status: 'ok', detail: `TCP ${target.host}:${target.port} reachable` };
}

export async function runChecks(config: Pick<Config, 'dataDir' | 'initialPeers'>): Promise<CheckResult[]> {
  return [
    checkNode(),
    checkElectron(),
    ...(await checkOnnxRuntime()),
    checkGpu(),
    checkSqlite(),
    checkDataDir(path.resolve(config.dataDir)),
    ...(await checkPeers(config.initialPeers)),
  ];
}

/** --initial-peers as the flag takes it: multiaddrs, or one join code, whose bootstrap peers are tried. */
async function checkPeers(initialPeers: readonly string[]): Promise<CheckResult[]> {
  const code = soleJoinCode(initialPeers);
  if (code !== undefined) {
    let bootstrap: string[];
    try {
      bootstrap = decodeJoinCode(code).bootstrap.map(String);
    } catch (err) {
      return [{ name: 'Join code', status: 'warn', detail: (err as Error).message, fix: 'copy the whole code (cohort:…) from the peer or coordinator that printed it' }];
    }
    return Promise.all(bootstrap.map((p) => checkPeer(p)));
  }
  return Promise.all(initialPeers.map((p) => checkPeer(p)));
}
