// Linux network namespaces for the benches (root needed): a bridge, namespaces on it through veth
// pairs, links shaped with tc tbf (this kernel has no netem), NAT routers with nftables masquerade,
// and removal of everything with a given prefix, also the leftovers of an interrupted run.
import { execFileSync } from 'node:child_process';

/** Runs a command, throwing with its stderr when it fails. */
export function sh(...args: string[]): void {
  execFileSync(args[0]!, args.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Runs a command whose failure means there was nothing to do (removing what may be gone already). */
export function quiet(...args: string[]): void {
  try {
    sh(...args);
  } catch {
    // already gone
  }
}

/** Runs `args` inside namespace `ns`. */
export function inNs(ns: string, ...args: string[]): void {
  sh('ip', 'netns', 'exec', ns, ...args);
}

/** The names of a family of namespaces and links: everything a bench creates starts with its prefix, so a later run can remove leftovers. */
export interface NetnsNames {
  /** Namespaces: `<prefix><suffix>`. */
  readonly prefix: string;
  /** The bridge. */
  readonly bridge: string;
  /** Root-namespace veth ends: `<vethPrefix><n>` (their peers are renamed inside the namespaces). */
  readonly vethPrefix: string;
}

/** Removes every namespace, the bridge and stray veth ends of `names` (safe to call at any time, repeatedly). */
export function removeNetns(names: NetnsNames): void {
  let list: string;
  try {
    list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  } catch {
    return; // no ip: nothing was created
  }
  for (const line of list.split('\n')) {
    const name = line.split(' ')[0];
    if (name && name.startsWith(names.prefix)) quiet('ip', 'netns', 'del', name);
  }
  quiet('ip', 'link', 'del', names.bridge);
  // veth ends left in the root namespace by a run killed between creating and moving them
  let links = '';
  try {
    links = execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' });
  } catch {
    // no links to read
  }
  const veth = new RegExp(`^\\d+: (${names.vethPrefix}\\d+)@`, 'gm');
  for (const m of links.matchAll(veth)) quiet('ip', 'link', 'del', m[1]!);
}

/** Creates the bridge (removing what a previous run left). */
export function createBridge(names: NetnsNames): void {
  removeNetns(names);
  sh('ip', 'link', 'add', names.bridge, 'type', 'bridge');
  sh('ip', 'link', 'set', names.bridge, 'up');
}

/**
 * Namespace `ns` on the bridge through veth `<vethPrefix><index>` (inside: `dev`), with `cidr`
 * (e.g. 10.77.0.3/24) on it and loopback up.
 */
export function attachToBridge(names: NetnsNames, ns: string, index: number, dev: string, cidr: string): void {
  const outer = `${names.vethPrefix}${index}`;
  quiet('ip', 'netns', 'add', ns);
  // the inner end is made inside the namespace: its name (eth0) may exist in the root namespace
  sh('ip', 'link', 'add', outer, 'type', 'veth', 'peer', 'name', dev, 'netns', ns);
  sh('ip', 'link', 'set', outer, 'master', names.bridge, 'up');
  inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  inNs(ns, 'ip', 'addr', 'add', cidr, 'dev', dev);
  inNs(ns, 'ip', 'link', 'set', dev, 'up');
}

/** tbf's rate and bucket: the bucket must hold at least one timer tick of traffic (rate ÷ HZ, HZ ≥ 100): 32 KiB up to 100 Mbit/s. */
export function tbf(mbit: number): string[] {
  return ['tbf', 'rate', `${mbit}mbit`, 'burst', `${Math.max(32, Math.ceil(mbit / 3))}kb`, 'latency', '200ms'];
}

/** Shapes the egress of `dev` (in namespace `ns`, or the root namespace when undefined) to `mbit` Mbit/s. */
export function shape(ns: string | undefined, dev: string, mbit: number): void {
  const args = ['tc', 'qdisc', 'add', 'dev', dev, 'root', ...tbf(mbit)];
  if (ns === undefined) sh(...args);
  else inNs(ns, ...args);
}

/** Installs nftables from Debian when `nft` is missing (the NAT routers need it). */
export function ensureNft(): void {
  try {
    sh('nft', '--version');
    return;
  } catch {
    // not installed
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'nftables'], { stdio: 'ignore', env });
  sh('nft', '--version');
}

/**
 * Makes namespace `router` a home NAT router: `lanDev` faces its LAN, `wanDev` the bridge; forwarding on,
 * masquerade out of `wanDev` (outbound connections only: nothing from the bridge reaches the LAN unasked).
 */
export function natRouter(router: string, wanDev: string): void {
  inNs(router, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
  const rules = [
    'table ip nat {',
    '  chain postrouting { type nat hook postrouting priority srcnat; policy accept; oifname "' + wanDev + '" masquerade; }',
    '}',
    'table ip filter {',
    // a home router: replies to the LAN's own connections pass, new connections from outside do not
    '  chain forward { type filter hook forward priority filter; policy drop; ct state established,related accept; iifname != "' + wanDev + '" accept; }',
    '}',
  ].join('\n');
  execFileSync('ip', ['netns', 'exec', router, 'nft', '-f', '-'], { input: rules, stdio: ['pipe', 'ignore', 'pipe'] });
}

/** A veth pair between two namespaces: `aDev` in `a` with `aCidr`, `bDev` in `b` with `bCidr`. */
export function linkNamespaces(a: string, aDev: string, aCidr: string, b: string, bDev: string, bCidr: string): void {
  quiet('ip', 'netns', 'add', a);
  quiet('ip', 'netns', 'add', b);
  sh('ip', 'link', 'add', aDev, 'netns', a, 'type', 'veth', 'peer', 'name', bDev, 'netns', b);
  for (const [ns, dev, cidr] of [
    [a, aDev, aCidr],
    [b, bDev, bCidr],
  ] as const) {
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    inNs(ns, 'ip', 'addr', 'add', cidr, 'dev', dev);
    inNs(ns, 'ip', 'link', 'set', dev, 'up');
  }
}
