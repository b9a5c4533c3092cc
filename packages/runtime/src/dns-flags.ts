import { EDNS_DEFAULT_UDP_BYTES, UDP_LEGACY_MAX_BYTES } from '@cluster-dns/wire';
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
