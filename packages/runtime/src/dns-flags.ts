import {
  DEFAULT_TCP_UNSENT_BYTES,
  DEFAULT_TCP_UNSENT_TOTAL_BYTES,
  DEFAULT_TCP_WRITE_TIMEOUT_MS,
  EDNS_DEFAULT_UDP_BYTES,
  UDP_LEGACY_MAX_BYTES,
} from '@cluster-dns/wire';
import { flag } from './flags.js';

/**
 * dnsmasq's --edns-packet-max, the same row in both DNS servers: the largest UDP reply sent to an
 * EDNS0 client, and the size our OPT records advertise. 1232 is DNS Flag Day 2020's figure.
 */
export const ednsPacketMaxFlag = () =>
  flag.int(
    'largest UDP reply to an EDNS0 client, and the size our OPT advertises (DNS Flag Day 2020: 1232)',
    EDNS_DEFAULT_UDP_BYTES,
    { min: UDP_LEGACY_MAX_BYTES, max: 65535 },
  );

/** What the TCP backpressure rows parse to: wire's listener options of the same names. */
export interface TcpBackpressure {
  readonly maxTcpUnsentBytes: number;
  readonly maxTcpUnsentTotalBytes: number;
  readonly tcpWriteTimeoutMs: number;
}

/**
 * The TCP backpressure rows, the same in both DNS servers: how many octets of replies a client
 * that does not read may leave waiting in this process, on one connection and on all of them.
 */
export const tcpBackpressureFlags = () => ({
  'max-tcp-unsent-bytes': flag.int(
    'stop reading a TCP connection while this many octets of its replies wait for the client to read them',
    DEFAULT_TCP_UNSENT_BYTES,
    { min: 1024, max: 64 * 1024 * 1024 },
  ),
  'max-tcp-unsent-total-bytes': flag.int(
    'octets of replies waiting in every TCP connection together, at most; past it, connections whose client reads nothing are closed, largest first',
    DEFAULT_TCP_UNSENT_TOTAL_BYTES,
    { min: 64 * 1024, max: 4 * 1024 * 1024 * 1024 },
  ),
  'tcp-write-timeout': flag.duration(
    'close a TCP connection whose client has read none of its replies for this long',
    DEFAULT_TCP_WRITE_TIMEOUT_MS,
  ),
});

/** The backpressure rows' values, as the listener takes them. */
export function toTcpBackpressure(values: {
  'max-tcp-unsent-bytes': number;
  'max-tcp-unsent-total-bytes': number;
  'tcp-write-timeout': number;
}): TcpBackpressure {
  return {
    maxTcpUnsentBytes: values['max-tcp-unsent-bytes'],
    maxTcpUnsentTotalBytes: values['max-tcp-unsent-total-bytes'],
    tcpWriteTimeoutMs: values['tcp-write-timeout'],
  };
}
