export { DirectiveArgs } from './args.js';
export {
  type CorefileFiles,
  diskFiles,
  type FilesSeen,
  filesOf,
  recordedFiles,
  recordingFiles,
} from './corefile-files.js';
export { importsFingerprint } from './fingerprint.js';
export {
  type CompiledTemplate,
  compileTemplate,
  type TemplateData,
  TemplateRunError,
  TemplateSyntaxError,
  type TemplateValue,
} from './go-template.js';
export {
  CorefileError,
  type CorefileWarning,
  type Directive,
  type LineOrigin,
  originText,
  parseCorefile,
  type ServerBlock,
} from './parse.js';
export { ONCE_PER_BLOCK, PLUGIN_TABLE, type PluginSupport, pluginOf } from './plugin-table.js';
export { type AclAction, type AclConfig, type AclRule, aclRuleOf } from './plugins/acl.js';
export { CACHE_DEFAULTS, type CacheConfig, type CacheKind } from './plugins/cache.js';
export type { ConsolidateRule, ErrorsConfig } from './plugins/errors.js';
export type { FileConfig } from './plugins/file.js';
export type { ForwardConfig, ForwardHealthCheck, ForwardTls } from './plugins/forward.js';
export { type HostsConfig, type HostsEntry, parseHostsText } from './plugins/hosts.js';
export type { K8sExternalConfig } from './plugins/k8s-external.js';
export type { KubernetesConfig } from './plugins/kubernetes.js';
export { COMBINED_LOG_FORMAT, COMMON_LOG_FORMAT, type LogRule, type ResponseClass } from './plugins/log.js';
export type {
  Edns0Data,
  Edns0Rule,
  NameMatch,
  NameMatcher,
  NameRule,
  RcodeRule,
  RegexRewrite,
  RewriteRule,
  TtlRule,
} from './plugins/rewrite.js';
export type { ChaosConfig, Dns64Config } from './plugins/small.js';
export type { TemplateConfig } from './plugins/template.js';
export { RCODE_BY_NAME } from './rcode-names.js';
export { type ReadCorefileOptions, readCorefile, type ServerConfig } from './server-blocks.js';
export { corefilePlanText, type ValidateOptions, validateCorefile, validateCorefileAt } from './validate.js';
