// Shared set-up for the browser tests: Debian's Chromium driven by playwright-core against a real
// headless node started as a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { spawnCli, waitFor } from '../collab/processes.js';
import { CLI, ROOT, startProcess } from '../helpers/cli.js';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTEFACTS = path.join(ROOT, 'test-results');

/** Why the browser tests cannot run here, or undefined when they can. */
export function chromiumMissing(): string | undefined {
  return fs.existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is absent: install Debian's chromium (.ci/run does) to run the browser tests`;
}

/** Builds out/renderer when it is missing or stale, as `npm start` does. */
export async function ensureRendererBuilt(): Promise<void> {
  const { ensureBuilt } = (await import(path.join(ROOT, 'scripts', 'build.mjs'))) as { ensureBuilt: (log?: (m: string) => void) => void };
  ensureBuilt((m) => process.stderr.write(`${m}\n`));
}

/** A fresh directory; the caller's one after-hook stops its user first, then removes it (hooks run in registration order). */
function scratchDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface RunningNode {
  readonly url: string;
  readonly dataDir: string;
  readonly child: ChildProcess;
}

/** The real CLI: `cohort start --dashboard-port 0 --data-dir <dir>`, computing nothing (the page's numbers come from the metrics fixture). */
export const cohortStart = (dataDir: string): string[] => [CLI, 'start', '--dashboard-port', '0', '--data-dir', dataDir, '--log-format', 'json', '--training', 'off'];

/** The real CLI as `npm start` runs it: Start trains (alone, no join code) and the coordinator role is available. */
export const cohortStartTraining = (dataDir: string): string[] => [CLI, 'start', '--dashboard-port', '0', '--data-dir', dataDir, '--log-format', 'json'];

/**
 * Starts a node (by default the real `cohort start`) on a fresh data directory, which `prepare` fills
 * first when given; resolves with the URL it prints.
 */
export async function startNode(t: TestContext, argv: (dataDir: string) => string[] = cohortStart, env: NodeJS.ProcessEnv = {}, prepare?: (dataDir: string) => Promise<unknown>): Promise<RunningNode> {
  const dataDir = scratchDir('cohort-e2e-');
  await prepare?.(dataDir).catch((err: unknown) => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  });
  const proc = startProcess(t, argv(dataDir), { env });
  // after startProcess's own hook (which kills it): the directory goes once the node is gone
  t.after(async () => {
    await proc.exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  const [, url] = await waitFor(proc, /Cohort dashboard: (http:\/\/127\.0\.0\.1:\d+)/, 30_000);
  return { url: url!, dataDir, child: proc.child };
}

/** Runs the metrics fixture against a data directory (history, then `liveTicks` live points). */
export function feedMetrics(dataDir: string, liveTicks: number): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'test', 'fixtures', 'feed-training-metrics.ts'), dataDir, String(liveTicks)], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`metrics fixture failed (${code}): ${stderr}`)))));
}

/** Headless Chromium with a fresh profile, closed when the test ends. */
export async function launchBrowser(t: TestContext, colorScheme: 'light' | 'dark' = 'light'): Promise<BrowserContext> {
  const profile = scratchDir('cohort-chromium-');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    colorScheme,
    timeout: 30_000,
  });
  t.after(async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });
  return context;
}

/**
 * The real `cohort run --coordinator` of the browser tests' runs (sequence length 64, target batch 8,
 * progress every second) on `dataDir`: a run that pins the dataset held there, or none when it holds
 * none. Resolves with its join code; the process ends with the test.
 */
export async function startCoordinator(t: TestContext, runId: string, dataDir: string): Promise<string> {
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', runId, '--data-dir', dataDir, '--listen', '/ip4/127.0.0.1/tcp/0', '--refresh', '1', '--target-batch-size', '8', '--seq-len', '64']);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 60_000);
  return code!;
}

/**
 * A training node (the real `cohort start`; `prepare` fills its data directory first) whose dashboard,
 * in headless Chromium, is given the join code `code` and started. `errors`: the page's uncaught errors.
 */
export async function joinFromDashboard(t: TestContext, code: string, prepare?: (dataDir: string) => Promise<unknown>): Promise<{ readonly node: RunningNode; readonly page: Page; readonly errors: string[] }> {
  const node = await startNode(t, cohortStartTraining, {}, prepare);
  const page = await (await launchBrowser(t)).newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const settings = await page.request.post(`${node.url}/api/updateSettings`, { data: { firstRunDone: true, joinCode: code } });
  if (settings.status() !== 200) throw new Error(`updateSettings answered ${settings.status()}: ${await settings.text()}`);
  await page.goto(node.url);
  await page.getByRole('button', { name: 'Start' }).click({ timeout: 15_000 });
  return { node, page, errors };
}
