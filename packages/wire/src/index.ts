export { Cancellation, whenCancelled } from './cancellation.js';
export {
  type DnsServer,
  type ExchangeOptions,
  exchangeRaw,
  type QueryOptions,
  queryDns,
  randomQueryId,
  transferTcp,
} from './client.js';
export {
  CLIENT_ADDRESS_OPTION,
  clientAddressOf,
  encodeClientAddress,
  encodeClientSubnet,
} from './client-address-option.js';
export {
  EDNS_DEFAULT_UDP_BYTES,
  EDNS_DO_BIT,
  FLAG,
  HEADER_BYTES,
  OPCODE,
  OPCODE_MASK,
  OPCODE_SHIFT,
  OPT_RECORD_BYTES,
  opcodeName,
  QCLASS,
  QTYPE,
  RCODE,
  RCODE_MASK,
  rcodeLabel,
  rcodeName,
  TCP_MAX_BYTES,
  typeFromName,
  typeLabel,
  typeName,
  UDP_LEGACY_MAX_BYTES,
} from './constants.js';
export { replyRcode } from './dns-handler.js';
export { ERROR_CODES, type ErrorCode } from './error-codes.js';
export {
  AddressError,
  bindHint,
  bindReason,
  bindTarget,
  ClusterDnsError,
  ConnectionClosedError,
  DnsBindError,
  DnsTimeoutError,
  NameError,
  PoolClosedError,
  QueryFormatError,
} from './errors.js';
export {
  closestBlock,
  closestZone,
  type Fqdn,
  isDns1123Label,
  isDns1123Subdomain,
  isInZone,
  isValidName,
  labelsOf,
  parentOf,
  ROOT,
  toFqdn,
} from './fqdn.js';
export {
  addressOctets,
  type Cidr,
  canonicalIpv6,
  cidrContains,
  ipv4ToNumber,
  ipv6Groups,
  ipv6Nibbles,
  isLoopback,
  numberToIpv4,
  parseCidr,
  readApiAddress,
  withoutIpv4Mapping,
} from './ip-address.js';
export {
  DEFAULT_TCP_UNSENT_BYTES,
  DEFAULT_TCP_UNSENT_TOTAL_BYTES,
  DEFAULT_TCP_WRITE_TIMEOUT_MS,
  DEFAULT_UDP_RECEIVE_BUFFER_BYTES,
  type DnsListener,
  type Door,
  type ExpressLane,
  type ListenDnsOptions,
  listenDns,
  type QueryContext,
  type RawHandler,
  type Reply,
  reusePortSupported,
  type TcpRefusals,
  type TcpStalls,
  udpPortInUse,
} from './listener.js';
export {
  buildQueryMessage,
  DEFAULT_FLAGS,
  type DecodedMessage,
  type DnsFlags,
  type DnsMessage,
  decodeMessage,
  encodeMessage,
  type Question,
} from './message.js';
export { flagsWord, MessageWriter } from './message-writer.js';
export { ANY_PREFERENCE, anyAnswerType, minimalAnyReply } from './minimal-any.js';
export { MAX_LABEL_OCTETS, MAX_NAME_OCTETS, readName, skipName, writeName } from './names-on-wire.js';
export {
  carriesEveryName,
  decodeNotifyChanges,
  encodeNotifyChanges,
  NOTIFY_CHANGES_OPTION,
  type NotifyChanges,
} from './notify-changes.js';
export { latin1Of, putU16, putU32, u16, u32 } from './octets.js';
export {
  type EdnsOption,
  ednsOption,
  ednsOptions,
  encodeOptRecord,
  optRecordWith,
  optRecordWithOptions,
} from './opt-record.js';
export {
  createQueryPipeline,
  type DnsRequest,
  type PipelineOptions,
  type QueryHandler,
  type QueryOutcome,
  type Rejection,
} from './pipeline.js';
export {
  decodeProgrammingTimes,
  encodeProgrammingTimes,
  MAX_PROGRAMMED_PER_TRANSFER,
  PROGRAMMING_TIMES_OPTION,
  type ProgrammedChange,
  type ProgrammedKind,
} from './programming-times.js';
export {
  type Edns,
  nameHashOf,
  nameHashWith,
  opcodeOf,
  type ParsedQuery,
  PlainQuestion,
  parseQuery,
  questionInZone,
  questionOctetsOf,
  readPlainQuery,
  sameNameOctets,
  sameNameOctetsAt,
} from './query.js';
export { assembleReply, copyRecord, copyWithoutOpt, recordTarget } from './record-copy.js';
export {
  absoluteName,
  classFromText,
  classText,
  isDnssecType,
  parseRecordText,
  RecordTextError,
  recordText,
  sameRecord,
  ttlFromText,
  typeFromText,
  typeText,
} from './record-text.js';
export { findTurnRun, type TurnRun, turnRecords } from './record-turn.js';
export type {
  AaaaRecord,
  ARecord,
  DecodedRr,
  MxRecord,
  NameRecord,
  OpaqueRecord,
  OptRecord,
  Rr,
  Soa,
  SoaRecord,
  SrvRecord,
  TxtRecord,
} from './records.js';
export { checkReply, compareQuestion, questionEndOf, type RejectReason } from './reply-check.js';
export {
  answerPlainQuery,
  answerPlainRefusal,
  type BareResponseOptions,
  buildBareResponse,
  buildHeaderOnlyResponse,
  finishFromTemplate,
  maxResponseBytes,
  type TemplatePatch,
  type Transport,
} from './response.js';
export { deniedZoneOf, type ScannedRecord, type ScannedResponse, scanResponse } from './response-scan.js';
export { addressFromReverseName, reverseNameOf, reverseZonesOf } from './reverse-name.js';
export { type AskedQuestion, answerThroughSearch } from './search-answer.js';
export { type ReplySections, replyFromSections } from './section-reply.js';
export { chainStages, type Next, type Stage } from './stage.js';
export { truncateReply, truncateToQuestion } from './truncate.js';
export { LIBUV_UDP_BATCH, UdpBacklog } from './udp-backlog.js';
export { createUdpFanout, type UdpFanout } from './udp-fanout.js';
export { createUpstreamTcp, type UpstreamTcp, type UpstreamTcpOptions } from './upstream-tcp.js';
export { createUpstreamUdp, type UpstreamUdp } from './upstream-udp.js';
export {
  buildIxfrQuery,
  buildNotify,
  isNotifyAck,
  ixfrQuerySerial,
  serialNewer,
  TransferEnd,
  type ZoneChange,
  ZoneChangeReader,
  ZoneTransferError,
} from './zone-change.js';
export { parseZoneFile, type ZoneFileOptions } from './zone-file.js';
export {
  decodeZonePosition,
  encodeZonePosition,
  objectHash,
  type ResourcePosition,
  resourceVersionNumber,
  type StateFingerprint,
  ZONE_POSITION_OPTION,
  type ZonePosition,
} from './zone-position.js';
