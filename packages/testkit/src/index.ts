export {
  type ApiFaults,
  type ApiServerOptions,
  type RequestRecord,
  startApiServer,
  type TestApiServer,
} from './api-server.js';
export { type CommandResult, hasCommand, type RunOptions, runChecked, runCommand } from './command.js';
export { demoFlags } from './demo-options.js';
export * as fixtures from './fixtures.js';
export { freePort } from './free-port.js';
export { argsOf, autopathArgs, type Rendered, render } from './kustomize.js';
export {
  type CraftedPacket,
  checkExpectation,
  craftedPackets,
  type Expectation,
  header,
  mutate,
  nameBytes,
  optRecord,
  query,
  question,
  seededRandom,
} from './malformed.js';
export { loadManifestFolder } from './manifests.js';
export { createNetns, linkNetns, type Netns, netnsUnavailable } from './netns.js';
export { loopbackNodeCacheArgs } from './node-cache-args.js';
export { node22Binary } from './node22.js';
export { ObjectStore, type StoredEvent, type WatchEventType } from './object-store.js';
export { type LaunchedProcess, type LaunchOptions, type LogLine, launchProcess } from './process-launcher.js';
export { localRecordBuilderArgs } from './record-builder-args.js';
export { type KubeObject, parseResourcePath, RESOURCE_KINDS, type ResourceKind } from './resources.js';
export {
  replyTo,
  type SeenQuery,
  type SpoofKind,
  startTestUpstream,
  type TestUpstream,
  type TestUpstreamOptions,
  type UpstreamBehaviour,
  type UpstreamScript,
} from './test-upstream.js';
export { type WaitForOptions, waitFor } from './wait-for.js';
