import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { runChecked } from './command.js';

/**
 * Network namespaces a test makes itself (iproute2's `ip netns`), to run processes on port 53 and
 * on 0.0.0.0 as a Pod does, with their own resolv.conf, without touching the host's network.
 */
export interface Netns {
  readonly name: string;
  /** The command prefix that runs something inside: `ip netns exec <name>`. */
  readonly prefix: readonly string[];
  /** Runs a command inside and returns its stdout; rejects on a non-zero exit, naming it. */
  run(command: string, args: readonly string[], options?: { timeoutMs?: number }): Promise<string>;
  /**
   * The resolv.conf processes inside see: `ip netns exec` bind-mounts /etc/netns/<name>/resolv.conf
   * over /etc/resolv.conf, as the kubelet mounts a Pod's.
   */
  writeResolvConf(text: string): void;
  close(): void;
}

let counter = 0;

/** Why namespaces cannot be used here (not root, no iproute2), or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  if (spawnSync('ip', ['-V']).error) return 'iproute2 (the ip command) is not installed';
  const probe = `cdns-probe-${process.pid}`;
  const added = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (added.status !== 0) return `ip netns add failed: ${added.stderr.trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return undefined;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] });

/** A new namespace with loopback up. Close it in the test's cleanup. */
export function createNetns(): Netns {
  const name = `cdns-${process.pid}-${++counter}`;
  ip('netns', 'add', name);
  ip('-n', name, 'link', 'set', 'lo', 'up');
  const etc = `/etc/netns/${name}`;
  return {
    name,
    prefix: ['ip', 'netns', 'exec', name],
    run: (command, args, options = {}) =>
      runChecked('ip', ['netns', 'exec', name, command, ...args], { timeoutMs: options.timeoutMs ?? 20_000 }),
    writeResolvConf: (text) => {
      mkdirSync(etc, { recursive: true });
      writeFileSync(`${etc}/resolv.conf`, text);
    },
    close: () => {
      spawnSync('ip', ['netns', 'del', name]);
      rmSync(etc, { recursive: true, force: true });
    },
  };
}

/**
 * Joins two namespaces with a veth pair, giving each end an address (CIDR form, `192.0.2.2/24`),
 * and with `ipv6` an IPv6 one too (`fd10::2/64`; usable at once: no duplicate detection).
 */
export function linkNetns(
  a: Netns,
  addressA: string,
  b: Netns,
  addressB: string,
  ipv6?: { a: string; b: string },
): void {
  const id = ++counter;
  const [endA, endB] = [`cdv${process.pid % 10000}a${id}`, `cdv${process.pid % 10000}b${id}`];
  ip('link', 'add', endA, 'netns', a.name, 'type', 'veth', 'peer', 'name', endB, 'netns', b.name);
  ip('-n', a.name, 'addr', 'add', addressA, 'dev', endA);
  ip('-n', b.name, 'addr', 'add', addressB, 'dev', endB);
  if (ipv6) {
    ip('-n', a.name, 'addr', 'add', ipv6.a, 'dev', endA, 'nodad');
    ip('-n', b.name, 'addr', 'add', ipv6.b, 'dev', endB, 'nodad');
  }
  ip('-n', a.name, 'link', 'set', endA, 'up');
  ip('-n', b.name, 'link', 'set', endB, 'up');
}
