/**
 * Every stable error code this project throws, in one place. A log line's `err.code` is one of
 * these; docs/troubleshooting.md's "Errors and exit codes" table documents each (a test holds the two together). Add a
 * code here, then a subclass of ClusterDnsError next to the code that throws it.
 */
export const ERROR_CODES = {
  // Command line and configuration: startup exits 2 on the FLAG_ ones.
  FLAG_INVALID: 'a flag value does not parse or is out of range',
  FLAG_UNKNOWN: 'an argument names no flag',
  CONFIG_INVALID: 'a ConfigMap key is invalid; the last good configuration stays in use',
  KUBECONFIG_INVALID: 'no usable Kubernetes API configuration',
  COREFILE_INVALID: 'a Corefile line that does not parse, or names a plugin or option this stack does not run',
  NODE_SETUP_FAILED: "a command setting up the node's interface or rules (ip, iptables, nft) failed",
  // Sockets.
  DNS_BIND: 'a DNS listener could not bind its address',
  HTTP_BIND: 'an HTTP listener could not bind its address',
  // DNS on the wire.
  QUERY_MALFORMED: 'a message that cannot be read as DNS',
  NAME_INVALID: 'a name that cannot be written on the wire (label over 63 octets, name over 255)',
  RECORD_TEXT_INVALID: 'a record in presentation form (a zone file line, a template answer) that does not read',
  ADDRESS_INVALID: 'text that is not an IP address where one is needed',
  DNS_TIMEOUT: 'no valid reply from a DNS server within the time allowed',
  DNS_CONNECTION_CLOSED: 'a DNS server closed the TCP connection before replying',
  UDP_POOL_CLOSED: 'a query sent after an upstream socket pool (UDP, or kept TCP connections) was closed',
  ZONE_TRANSFER_FAILED: 'an IXFR or AXFR reply was refused or not a zone transfer',
  // Processes.
  WORKER_FAILED: 'a forwarder worker thread (--workers) failed to start',
  UPSTREAMS_FAILED: 'no upstream of a route answered',
  QUERY_JOSTLED: "an upstream question given up for a newer one: its route's share of questions in flight was full",
  API_REQUEST_FAILED: 'a Kubernetes API list or watch request failed',
  PROBE_FAILED: 'a sidecar DNS probe got no usable answer',
  STATS_INVALID: "the forwarder's CHAOS statistics reply is not what dnsmasq sends",
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
