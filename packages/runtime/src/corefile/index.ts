export { DirectiveArgs } from './args.js';
export { CorefileError, type Directive, parseCorefile, type ServerBlock } from './parse.js';
export { type AclAction, type AclConfig, type AclRule, aclRuleOf } from './plugins/acl.js';
export { CACHE_DEFAULTS, type CacheConfig, type CacheKind } from './plugins/cache.js';
export type { ForwardConfig } from './plugins/forward.js';
export { type HostsConfig, type HostsEntry, parseHostsText } from './plugins/hosts.js';
export type { KubernetesConfig } from './plugins/kubernetes.js';
export type { NameMatch, RegexRewrite, RewriteRule } from './plugins/rewrite.js';
export { NODE_LOCAL_PLUGINS, POD_PLUGINS, readCorefile, type ServerConfig } from './server-blocks.js';
