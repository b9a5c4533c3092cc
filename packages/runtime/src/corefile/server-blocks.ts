import { dirname, isAbsolute, join } from 'node:path';
import { type Fqdn, isValidName, parseZoneFile, QTYPE, toFqdn } from '@cluster-dns/wire';
import type { HostPort } from '../host-port.js';
import { DirectiveArgs } from './args.js';
import { type CorefileFiles, diskFiles } from './corefile-files.js';
import { CorefileError, type CorefileWarning, type LineOrigin, parseCorefile, type ServerBlock } from './parse.js';
import { ONCE_PER_BLOCK, pluginOf } from './plugin-table.js';
import { type AclConfig, setupAcl } from './plugins/acl.js';
import { type CacheConfig, setupCache } from './plugins/cache.js';
import { type ErrorsConfig, setupErrors } from './plugins/errors.js';
import { type FileConfig, setupFile } from './plugins/file.js';
import { type ForwardConfig, setupForward, setupProxy } from './plugins/forward.js';
import { type HostsConfig, setupHosts } from './plugins/hosts.js';
import { type K8sExternalConfig, setupK8sExternal } from './plugins/k8s-external.js';
import { type KubernetesConfig, setupKubernetes } from './plugins/kubernetes.js';
import { type LogRule, setupLog } from './plugins/log.js';
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
import {
  type ChaosConfig,
  type Dns64Config,
  setupAny,
  setupBufsize,
  setupChaos,
  setupDns64,
  setupRoot,
} from './plugins/small.js';
import { setupTemplate, type TemplateConfig } from './plugins/template.js';

/** One server block, each plugin it names set up (CoreDNS's setup.go: parse, then build elsewhere). */
export interface ServerConfig {
  /** Its keys: a zone and the port it listens on. */
  readonly keys: ReadonlyArray<{ readonly zone: Fqdn; readonly port: number }>;
  readonly line: number;
  readonly file: string;
  readonly bind: readonly string[] | undefined;
  readonly cache: CacheConfig | undefined;
  /** Its `forward`s (and `proxy`s), in the order written: several may each take a FROM. */
  readonly forwards: readonly ForwardConfig[];
  /** The first of `forwards`, for the modes that take one. */
  readonly forward: ForwardConfig | undefined;
  readonly kubernetes: KubernetesConfig | undefined;
  readonly k8sExternal: K8sExternalConfig | undefined;
  readonly hosts: HostsConfig | undefined;
  readonly files: readonly FileConfig[];
  /** In the order written: the first that matches applies (then the next too, with `continue`). */
  readonly rewrite: readonly RewriteRule[];
  /** In the order written: the first whose zone, class, type and regexes match answers. */
  readonly templates: readonly TemplateConfig[];
  readonly health: { readonly address: HostPort; readonly lameduckMs: number | undefined } | undefined;
  readonly ready: HostPort | undefined;
  readonly prometheus: HostPort | undefined;
  readonly reloadMs: number | undefined;
  /** `log` rules, in the order written (the first whose scope covers the name decides). */
  readonly logRules: readonly LogRule[];
  /** Whether the block has `log` at all. */
  readonly log: boolean;
  readonly errorsConfig: ErrorsConfig | undefined;
  readonly errors: boolean;
  readonly loop: boolean;
  readonly loadbalance: boolean;
  readonly bufsize: number | undefined;
  readonly chaos: ChaosConfig | undefined;
  readonly dns64: Dns64Config | undefined;
  readonly any: boolean;
  /** `whoami`: every question answered with the asker's address and port. */
  readonly whoami: boolean;
  /** `root PATH`: where relative file names are read from. */
  readonly root: string | undefined;
  /** Its `acl`s, in the order written: each covers its zones, the first that decides wins. */
  readonly acls: readonly AclConfig[];
  /** `autopath @kubernetes`: server-side search of the pods' search paths; the zones it names, if any. */
  readonly autopath: { readonly zones: readonly string[] } | undefined;
  /** Each plugin the block names, in CoreDNS's order (not the order written), with where it was written. */
  readonly plan: ReadonlyArray<{ readonly name: string; readonly at: LineOrigin; readonly ignored?: string }>;
  /** The line of each plugin named, for errors a consumer finds later. */
  readonly lines: ReadonlyMap<string, number>;
}

/** What a mode runs beyond what both run: the kube-dns-shaped node-local Corefile has no cluster plugins. */
const NOT_IN_NODE_LOCAL = new Set(['kubernetes', 'k8s_external', 'autopath', 'ready']);

export interface ReadCorefileOptions {
  /** The Corefile's path: errors name it, and relative imports are read from its folder. */
  readonly source?: string;
  readonly mode: 'pod' | 'node-local';
  /** Where imports are read from (the disk by default). */
  readonly files?: CorefileFiles;
  /** `{$NAME}` is replaced from these. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Told of each warning: a plugin accepted and ignored, a deprecated option, a glob that matches nothing. */
  readonly onWarning?: (warning: CorefileWarning) => void;
}

function parseKey(block: ServerBlock, key: string): { zone: Fqdn; port: number } {
  const m = /^(?:dns:\/\/)?([^:]+?)(?::(\d+))?$/.exec(key);
  const name = m?.[1] ?? '';
  if (!m || !(name === '.' || isValidName(name)) || (m[2] !== undefined && Number(m[2]) > 65535))
    throw new CorefileError(
      block.line,
      `server block key ${JSON.stringify(key)} is not zone[:port] (only dns:// servers are supported)`,
      block.file,
    );
  return { zone: toFqdn(name), port: m[2] === undefined ? 53 : Number(m[2]) };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function emptyConfig(block: ServerBlock): Mutable<ServerConfig> & {
  rewrite: RewriteRule[];
  templates: TemplateConfig[];
  forwards: ForwardConfig[];
  files: FileConfig[];
  logRules: LogRule[];
  acls: AclConfig[];
  plan: Array<ServerConfig['plan'][number]>;
} {
  return {
    keys: block.keys.map((k) => parseKey(block, k)),
    line: block.line,
    file: block.file,
    bind: undefined,
    cache: undefined,
    forwards: [],
    forward: undefined,
    kubernetes: undefined,
    k8sExternal: undefined,
    hosts: undefined,
    files: [],
    rewrite: [],
    templates: [],
    health: undefined,
    ready: undefined,
    prometheus: undefined,
    reloadMs: undefined,
    logRules: [],
    log: false,
    errorsConfig: undefined,
    errors: false,
    loop: false,
    loadbalance: false,
    bufsize: undefined,
    chaos: undefined,
    dns64: undefined,
    any: false,
    whoami: false,
    root: undefined,
    acls: [],
    autopath: undefined,
    plan: [],
    lines: new Map(),
  };
}

/** Sets up each plugin of one block, in the order written; `plan` is then put in CoreDNS's order. */
function readBlock(block: ServerBlock, options: ReadCorefileOptions, source: string): ServerConfig {
  const config = emptyConfig(block);
  const lines = config.lines as Map<string, number>;
  const seen = new Map<string, LineOrigin>();
  for (const d of block.directives) {
    const a = new DirectiveArgs(d, source, d.name, options.onWarning);
    const known = pluginOf(d.name);
    if (!known)
      throw new CorefileError(
        d.line,
        `unknown directive '${d.name}': not a plugin of CoreDNS (a plugin of another build? docs/corefile.md lists what runs here)`,
        d.file,
      );
    if (known.support.status === 'refused') a.fail(`not supported here: ${known.support.note}`);
    if (options.mode === 'node-local' && NOT_IN_NODE_LOCAL.has(d.name))
      a.fail('not supported in node-local mode: a node cache forwards the cluster zone to the cluster’s DNS');
    const first = seen.get(d.name);
    if (first && ONCE_PER_BLOCK.has(d.name))
      throw new CorefileError(
        d.line,
        `plugin/${d.name}: this plugin can only be used once per Server Block (first at ${first.file}:${first.line})`,
        d.file,
      );
    if (!first) {
      seen.set(d.name, d);
      lines.set(d.name, d.line);
      config.plan.push({
        name: d.name,
        at: d,
        ...(known.support.status === 'ignored' ? { ignored: known.support.note } : {}),
      });
    }
    if (known.support.status === 'ignored') {
      a.warn(`accepted and ignored: ${known.support.note}`);
      continue;
    }
    setUp(config, d.name, a);
  }
  config.forward = config.forwards[0];
  for (const file of config.files) checkZoneFile(file, config, options);
  config.plan.sort((x, y) => (pluginOf(x.name)?.index ?? 0) - (pluginOf(y.name)?.index ?? 0));
  return config;
}

function setUp(config: ReturnType<typeof emptyConfig>, name: string, a: DirectiveArgs): void {
  switch (name) {
    case 'bind':
      config.bind = [...new Set([...(config.bind ?? []), ...setupBind(a)])];
      break;
    case 'cache':
      config.cache = setupCache(a);
      break;
    case 'forward':
      config.forwards.push(setupForward(a));
      break;
    case 'proxy':
      a.warn('proxy was removed in CoreDNS 1.4; read as forward');
      config.forwards.push(setupProxy(a));
      break;
    case 'kubernetes':
      config.kubernetes = setupKubernetes(a);
      break;
    case 'k8s_external':
      config.k8sExternal = setupK8sExternal(a);
      break;
    case 'hosts':
      config.hosts = setupHosts(a);
      break;
    case 'file':
      config.files.push(setupFile(a));
      break;
    case 'rewrite':
      config.rewrite.push(setupRewrite(a));
      break;
    case 'template':
      config.templates.push(setupTemplate(a));
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
      config.acls.push(setupAcl(a));
      break;
    case 'autopath':
      config.autopath = setupAutopath(a);
      break;
    case 'loadbalance':
      setupLoadbalance(a);
      config.loadbalance = true;
      break;
    case 'log':
      config.logRules.push(...setupLog(a));
      config.log = true;
      break;
    case 'errors':
      config.errorsConfig = setupErrors(a);
      config.errors = true;
      break;
    case 'loop':
      config.loop = setupFlag(a);
      break;
    case 'bufsize':
      config.bufsize = setupBufsize(a);
      break;
    case 'chaos':
      config.chaos = setupChaos(a);
      break;
    case 'dns64':
      config.dns64 = setupDns64(a);
      break;
    case 'any':
      config.any = setupAny(a);
      break;
    case 'whoami':
      a.noBlock();
      a.count(0, 0, 'whoami');
      config.whoami = true;
      break;
    case 'root':
      config.root = setupRoot(a);
      break;
    default:
      a.fail('is in the plugin table as run here, but has no setup (a bug: please report it)');
  }
}

/**
 * A `file` line's zone, read as CoreDNS's setup reads it: one that does not parse, or has no SOA,
 * refuses the Corefile at its line; one that cannot be read is a warning (it may come later).
 */
function checkZoneFile(file: FileConfig, block: ServerConfig, options: ReadCorefileOptions): void {
  const path = isAbsolute(file.file) ? file.file : join(block.root ?? dirname(block.file), file.file);
  const files = options.files ?? diskFiles;
  let text: string;
  try {
    text = files.read(path);
  } catch (error) {
    options.onWarning?.({
      line: file.line,
      file: block.file,
      message: `file ${path}: cannot be read (${(error as Error).message}); its zone answers nothing until it can`,
    });
    return;
  }
  for (const origin of file.zones ?? block.keys.map((k) => k.zone)) {
    try {
      const records = parseZoneFile(text, {
        origin,
        include: (p) => files.read(isAbsolute(p) ? p : join(dirname(path), p)),
      });
      // CoreDNS's Parse asks for a SOA, not that it be the origin's.
      if (!records.some((r) => r.type === QTYPE.SOA)) throw new Error(`has no SOA record for origin ${origin}`);
    } catch (error) {
      throw new CorefileError(file.line, `file ${path}: ${(error as Error).message}`, block.file);
    }
  }
}

/**
 * Reads a Corefile: parses it with its imports (parse.ts), then sets up every plugin of every
 * block. The one Corefile reader of every process and mode: `mode` says which plugins it takes.
 * Throws CorefileError naming the file, the line and the plugin of the first thing it cannot take;
 * what it takes but ignores goes to `onWarning`.
 */
export function readCorefile(text: string, options: ReadCorefileOptions): ServerConfig[] {
  const source = options.source ?? 'Corefile';
  const blocks = parseCorefile(text, {
    source,
    ...(options.files ? { files: options.files } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(options.onWarning ? { onWarning: options.onWarning } : {}),
  });
  if (blocks.length === 0) throw new CorefileError(1, 'no server block', source);
  return blocks.map((block) => readBlock(block, options, source));
}
