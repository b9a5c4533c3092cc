export * from './corefile/index.js';
export { ednsPacketMaxFlag, type TcpBackpressure, tcpBackpressureFlags, toTcpBackpressure } from './dns-flags.js';
export { formatGoDuration, parseGoDurationMs } from './duration.js';
export { ClusterDnsError, describeError, FlagError, UnknownFlagError } from './errors.js';
export { type FlagDef, type FlagValues, flag, formatFlagHelp, type ParsedFlags, parseFlags } from './flags.js';
export { type HostPort, parseHostPort } from './host-port.js';
export { HttpBindError, type HttpListener, type HttpRoute, listenHttp, routesListener } from './http-listener.js';
export {
  type ClientLimits,
  ConfigError,
  EMPTY_KUBE_DNS_CONFIG,
  type KubeDnsConfig,
  parseKubeDnsConfig,
  readConfigDir,
} from './kube-dns-config.js';
export {
  CloseStack,
  type MainSpec,
  nodeProcessHooks,
  type ProcessHooks,
  type RunningService,
  runMain,
  sleep,
} from './lifecycle.js';
export {
  createLogger,
  createSilentLogger,
  type LogFields,
  type Logger,
  type LogLevel,
  levelFromVerbosity,
} from './logger.js';
export { counterFrom, gaugeFrom, labelledFrom } from './metrics-from.js';
export { collectProcessMetrics } from './process-metrics.js';
export {
  PROGRAMMING_DURATION_BUCKETS,
  PROGRAMMING_DURATION_NAME,
  ProgrammingLatency,
  registerProgrammingLatency,
} from './programming-latency.js';
export {
  COREDNS_DURATION_BUCKETS,
  type HistogramSnapshot,
  HistogramStore,
  LabelledCounts,
  registerHistogram,
  typeIndexOf,
} from './query-stats.js';
export { ServerCore, type ServerCoreOptions } from './server/server-core.js';
