import { corednsCaseSuite } from '../../testing/coredns-cases.js';

// The forward plugin's setup tables: its lines read by the one Corefile reader. How it asks is
// tested against real servers (forward-stage, upstream, tls-upstreams and the e2e tests).
corednsCaseSuite('forward', {
  stage: () => {
    throw new Error('forward has setup cases only');
  },
  refusedMatching: [
    [/https:\/\//, 'DNS over HTTPS upstreams are refused, naming the line: tls:// is taken'],
    [/source_address/, 'source_address is refused, naming the line: the kernel picks the source address'],
    [/%foo.*%bar|%example\.net.*%example\.com/, 'one TLS server name per forward: give each name its own forward'],
    [
      /forward \. (resolv|resolv-ipv6|empty)\.conf/,
      'a resolv.conf destination is an absolute path, the only one of its forward; a relative one is refused naming it',
    ],
  ],
});
