import { RCODE } from '@cluster-dns/wire';

/**
 * Go's `dns.StringToRcode` as CoreDNS's plugins read rcodes from a Corefile (`template`'s `rcode`,
 * `rewrite`'s rcode rule, `forward`'s `failover`): RFC names, upper case. 16 is BADSIG there
 * (miekg/dns leaves BADVERS out of the table, as it shares the value).
 */
export const RCODE_BY_NAME: Readonly<Record<string, number>> = {
  NOERROR: RCODE.NOERROR,
  FORMERR: RCODE.FORMERR,
  SERVFAIL: RCODE.SERVFAIL,
  NXDOMAIN: RCODE.NXDOMAIN,
  NOTIMP: RCODE.NOTIMP,
  REFUSED: RCODE.REFUSED,
  YXDOMAIN: 6,
  YXRRSET: 7,
  NXRRSET: 8,
  NOTAUTH: 9,
  NOTZONE: 10,
  BADSIG: 16,
  BADKEY: 17,
  BADTIME: 18,
  BADMODE: 19,
  BADNAME: 20,
  BADALG: 21,
  BADTRUNC: 22,
  BADCOOKIE: 23,
};
