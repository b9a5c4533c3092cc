import {
  type ChaosConfig,
  ConfigError,
  type Dns64Config,
  type ErrorsConfig,
  type LogRule,
  parseHostsText,
  type ServerConfig,
  type TemplateConfig,
} from '@cluster-dns/runtime';
import { type Fqdn, RecordTextError } from '@cluster-dns/wire';
import type { BlockScoped } from '../config/block-scoped.js';
import { type ScopedAcl, scopedAcl } from '../plugins/acl/acl-rules.js';
import { FileZone } from '../plugins/file/file-zone.js';
import { HostsTable, type ScopedHosts } from '../plugins/hosts/hosts-table.js';
import type { ScopedRewrites } from '../plugins/rewrite/rewrite-rules.js';
import { corefilePath, type FileSource } from './corefile-plan.js';

/**
 * What a configuration's server blocks give the plugins that read them per block (Corefile mode and
 * node-local mode; the kube-dns layout has none): read with the routes, applied with them.
 */
export interface BlockPlugins {
  readonly rewrites: readonly ScopedRewrites[];
  /** Each block's hosts table (every block listed, when any has one). */
  readonly hosts: readonly BlockScoped<HostsTable>[];
  /** `acl` blocks: who may ask what, by zone (plugins/acl). */
  readonly acls: readonly ScopedAcl[];
  readonly templates: readonly BlockScoped<readonly TemplateConfig[]>[];
  readonly logs: readonly BlockScoped<readonly LogRule[]>[];
  readonly errors: readonly BlockScoped<ErrorsConfig>[];
  readonly bufsize: readonly BlockScoped<number>[];
  readonly dns64: readonly BlockScoped<Dns64Config>[];
  readonly any: readonly BlockScoped<true>[];
  readonly chaos: readonly BlockScoped<ChaosConfig>[];
  readonly whoami: readonly BlockScoped<true>[];
  readonly files: readonly FileZone[];
}

export const NO_BLOCK_PLUGINS: BlockPlugins = Object.freeze({
  rewrites: [],
  hosts: [],
  acls: [],
  templates: [],
  logs: [],
  errors: [],
  bufsize: [],
  dns64: [],
  any: [],
  chaos: [],
  whoami: [],
  files: [],
});

/** The plugins of every block that need no file read: the rest (hosts, file) are built from what was read. */
export function blockPluginsOf(
  servers: readonly ServerConfig[],
  built: { hosts: readonly HostsTable[]; files: readonly FileZone[] },
): BlockPlugins {
  // Every block is listed when any names the plugin, so a name takes its own block's (or none),
  // never an enclosing block's; when none names it, the list is empty and the stage costs nothing.
  const scoped = <T>(pick: (block: ServerConfig) => T | undefined): BlockScoped<T>[] => {
    const all = servers.map((block) => ({ zones: zonesOf(block), value: pick(block) }));
    return all.some((b) => b.value !== undefined) ? all : [];
  };
  return {
    // Every block, when any rewrites: a name takes its own block's rules (none), not an enclosing one's.
    rewrites: servers.some((b) => b.rewrite.length)
      ? servers.map((b) => ({ zones: zonesOf(b), rules: b.rewrite }))
      : [],
    hosts: scoped((b) => built.hosts.find((t) => t.config.blockZones?.join() === zonesOf(b).join())),
    // Every block is listed, an acl-less one with no rules: a name is judged by the block that serves it.
    acls: servers.flatMap((b) => {
      const zones = zonesOf(b);
      return b.acls.length ? b.acls.map((acl) => scopedAcl(acl, zones)) : [{ zones, rules: [], blockZones: zones }];
    }),
    // A template without zones of its own takes the block's (plugin.OriginsFromArgsOrServerBlock).
    templates: scoped((b) =>
      b.templates.length ? b.templates.map((t) => ({ ...t, zones: t.zones ?? zonesOf(b) })) : undefined,
    ),
    logs: scoped((b) => (b.logRules.length ? b.logRules : undefined)),
    errors: scoped((b) => b.errorsConfig),
    bufsize: scoped((b) => b.bufsize),
    dns64: scoped((b) => b.dns64),
    any: scoped((b) => (b.any ? true : undefined)),
    chaos: scoped((b) => b.chaos),
    whoami: scoped((b) => (b.whoami ? true : undefined)),
    files: built.files,
  };
}

export const zonesOf = (block: ServerConfig): Fqdn[] => block.keys.map((k) => k.zone);

/**
 * Every block's plugins from what was read: hosts tables and file zones built from their files
 * (`read` gives a file's text, or undefined when it was not read), the rest as the blocks say.
 * Throws ConfigError naming a file that did not read or a zone that does not parse.
 */
export function readBlockPlugins(
  plan: { servers: readonly ServerConfig[]; hosts: readonly ScopedHosts[]; files: readonly FileSource[] },
  read: (path: string) => string | undefined,
): BlockPlugins {
  const text = (what: string, path: string) => {
    const found = read(path);
    if (found === undefined)
      throw new ConfigError('Corefile', `${what} ${path}: not read (a new file needs a restart)`);
    return found;
  };
  // A hosts file that is not there serves its inline entries, as CoreDNS's does.
  const hosts = plan.hosts.map((h) => new HostsTable(h, parseHostsText(read(h.file) ?? '')));
  const files = plan.files.flatMap((f) => {
    // A zone file that is not there yet: its zone answers nothing until it is (the reader warned).
    if (read(f.file) === undefined) return [];
    try {
      return FileZone.fromText(text('file', f.file), f.origin, {
        fallthrough: f.fallthrough,
        include: (path) => text('file $INCLUDE', corefilePath(path, undefined, f.file)),
      });
    } catch (error) {
      if (error instanceof RecordTextError) throw new ConfigError('Corefile', `file ${f.file}: ${error.message}`);
      throw error;
    }
  });
  return blockPluginsOf(plan.servers, { hosts, files });
}
