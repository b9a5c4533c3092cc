import { type Fqdn, isValidName, toFqdn } from '@cluster-dns/wire';
import type { HostPort } from '../host-port.js';
import { DirectiveArgs } from './args.js';
import { CorefileError, parseCorefile, type ServerBlock } from './parse.js';
import { type AclConfig, setupAcl } from './plugins/acl.js';
import { type CacheConfig, setupCache } from './plugins/cache.js';
import { type ForwardConfig, setupForward } from './plugins/forward.js';
import { type HostsConfig, setupHosts } from './plugins/hosts.js';
import { type KubernetesConfig, setupKubernetes } from './plugins/kubernetes.js';
import { type RewriteRule, setupRewrite } from './plugins/rewrite.js';
import {
  setupAutopath,
  setupBind,
  setupFlag,
  setupHealth,
  setupLoadbalance,
  setupPrometheus,
  setupReady,
  setupReload,
} from './plugins/simple.js';

/** One server block, each plugin it names set up (CoreDNS's setup.go: parse, then build elsewhere). */
export interface ServerConfig {
  /** Its keys: a zone and the port it listens on. */
  readonly keys: ReadonlyArray<{ readonly zone: Fqdn; readonly port: number }>;
  readonly line: number;
  readonly bind: readonly string[] | undefined;
  readonly cache: CacheConfig | undefined;
  readonly forward: ForwardConfig | undefined;
  readonly kubernetes: KubernetesConfig | undefined;
  readonly hosts: HostsConfig | undefined;
  /** In the order written: the first that matches applies (then the next too, with `continue`). */
  readonly rewrite: readonly RewriteRule[];
  readonly health: { readonly address: HostPort; readonly lameduckMs: number | undefined } | undefined;
  readonly ready: HostPort | undefined;
  readonly prometheus: HostPort | undefined;
  readonly reloadMs: number | undefined;
  readonly log: boolean;
  readonly errors: boolean;
  readonly loop: boolean;
  readonly loadbalance: boolean;
  /** `acl`: who may ask what (its rules in order). */
  readonly acl: AclConfig | undefined;
  /** `autopath @kubernetes`: server-side search of the pods' search paths; the zones it names, if any. */
  readonly autopath: { readonly zones: readonly string[] } | undefined;
  /** The line of each plugin named, for errors a consumer finds later. */
  readonly lines: ReadonlyMap<string, number>;
}

/** The plugins a mode takes; anything else in a Corefile is an error naming its line. */
export const POD_PLUGINS = [
  'acl',
  'autopath',
  'bind',
  'cache',
  'errors',
  'forward',
  'health',
  'hosts',
  'kubernetes',
  'loadbalance',
  'log',
  'loop',
  'prometheus',
  'ready',
  'reload',
  'rewrite',
] as const;
export const NODE_LOCAL_PLUGINS = [
  'acl',
  'bind',
  'cache',
  'errors',
  'forward',
  'health',
  'log',
  'loop',
  'prometheus',
  'reload',
] as const;
export type PluginName = (typeof POD_PLUGINS)[number];

function parseKey(block: ServerBlock, key: string, source: string): { zone: Fqdn; port: number } {
  const m = /^(?:dns:\/\/)?([^:]+?)(?::(\d+))?$/.exec(key);
  const name = m?.[1] ?? '';
  if (!m || !(name === '.' || isValidName(name)) || (m[2] !== undefined && Number(m[2]) > 65535))
    throw new CorefileError(
      block.line,
      `server block key ${JSON.stringify(key)} is not zone[:port] (only dns:// servers are supported)`,
      source,
    );
  return { zone: toFqdn(name), port: m[2] === undefined ? 53 : Number(m[2]) };
}

/** Sets up each plugin of one block; `allowed` names the plugins of the mode, `mode` goes in the error. */
function readBlock(block: ServerBlock, source: string, allowed: readonly string[], mode: string): ServerConfig {
  const once = new Set([
    'autopath',
    'bind',
    'cache',
    'forward',
    'kubernetes',
    'hosts',
    'health',
    'ready',
    'prometheus',
    'reload',
  ]);
  const lines = new Map<string, number>();
  const config: { -readonly [K in keyof ServerConfig]: ServerConfig[K] } & { rewrite: RewriteRule[] } = {
    keys: block.keys.map((k) => parseKey(block, k, source)),
    line: block.line,
    bind: undefined,
    cache: undefined,
    forward: undefined,
    kubernetes: undefined,
    hosts: undefined,
    rewrite: [],
    health: undefined,
    ready: undefined,
    prometheus: undefined,
    reloadMs: undefined,
    log: false,
    errors: false,
    loop: false,
    loadbalance: false,
    acl: undefined,
    autopath: undefined,
    lines,
  };
  for (const d of block.directives) {
    const a = new DirectiveArgs(d, source);
    if (!allowed.includes(d.name))
      throw new CorefileError(d.line, `plugin "${d.name}" is not supported in ${mode} (see docs/corefile.md)`, source);
    if (once.has(d.name) && lines.has(d.name))
      a.fail(`is given twice in this server block (line ${lines.get(d.name)} first)`);
    if (!lines.has(d.name)) lines.set(d.name, d.line);
    switch (d.name as PluginName) {
      case 'bind':
        config.bind = setupBind(a);
        break;
      case 'cache':
        config.cache = setupCache(a);
        break;
      case 'forward':
        config.forward = setupForward(a);
        break;
      case 'kubernetes':
        config.kubernetes = setupKubernetes(a);
        break;
      case 'hosts':
        config.hosts = setupHosts(a);
        break;
      case 'rewrite':
        config.rewrite.push(setupRewrite(a));
        break;
      case 'health':
        config.health = setupHealth(a);
        break;
      case 'ready':
        config.ready = setupReady(a);
        break;
      case 'prometheus':
        config.prometheus = setupPrometheus(a);
        break;
      case 'reload':
        config.reloadMs = setupReload(a);
        break;
      case 'acl':
        config.acl = setupAcl(a);
        break;
      case 'autopath':
        config.autopath = setupAutopath(a);
        break;
      case 'loadbalance':
        setupLoadbalance(a);
        config.loadbalance = true;
        break;
      case 'errors':
      case 'log':
      case 'loop':
        config[d.name as 'errors' | 'log' | 'loop'] = setupFlag(a);
        break;
    }
  }
  return config;
}

/**
 * Reads a Corefile: parses it (parse.ts), then sets up every plugin of every block. The one
 * Corefile reader of both modes: `mode` says which plugins it takes. Throws CorefileError naming
 * the line (and the plugin) of the first thing it cannot take.
 */
export function readCorefile(text: string, options: { source?: string; mode: 'pod' | 'node-local' }): ServerConfig[] {
  const source = options.source ?? 'Corefile';
  const allowed = options.mode === 'pod' ? POD_PLUGINS : NODE_LOCAL_PLUGINS;
  const modeName = options.mode === 'pod' ? 'Corefile mode' : 'node-local mode';
  return parseCorefile(text, source).map((block) => readBlock(block, source, allowed, modeName));
}
