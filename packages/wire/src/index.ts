export {
  type DnsServer,
  type ExchangeOptions,
  exchangeRaw,
  type QueryOptions,
  queryDns,
  type RejectReason,
  randomQueryId,
} from './client.js';
export {
  EDNS_MAX_UDP_BYTES,
  HEADER_BYTES,
  OPCODE,
  QCLASS,
  QTYPE,
  RCODE,
  rcodeName,
  TCP_MAX_BYTES,
  typeFromName,
  typeName,
  UDP_LEGACY_MAX_BYTES,
} from './constants.js';
export { DnsBindError, DnsTimeoutError, QueryFormatError } from './errors.js';
export {
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
  type DnsListener,
  type ListenDnsOptions,
  listenDns,
  type QueryContext,
  type RawHandler,
  type Reply,
} from './listener.js';
export {
  buildQueryMessage,
  DEFAULT_FLAGS,
  type DnsFlags,
  type DnsMessage,
  decodeMessage,
  encodeMessage,
  type Question,
  type Rr,
  type Soa,
} from './message.js';
export { readName, skipName, writeName } from './names-on-wire.js';
export { encodeOptRecord } from './opt-record.js';
export { type Edns, type ParsedQuery, parseQuery } from './query.js';
export {
  type BareResponseOptions,
  buildBareResponse,
  buildFormatErrorResponse,
  finishFromTemplate,
  maxResponseBytes,
  type TemplatePatch,
  type Transport,
} from './response.js';
export { type ScannedRecord, type ScannedResponse, scanResponse, stripOpt } from './response-scan.js';
export { addressFromReverseName, canonicalIpv6, reverseNameOf } from './reverse-name.js';
export { createUdpPool, type UdpPool, type UdpPoolOptions } from './udp-pool.js';
