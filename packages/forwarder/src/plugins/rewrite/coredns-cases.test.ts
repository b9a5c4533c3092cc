import { corednsCaseSuite, loadCases } from '../../testing/coredns-cases.js';
import { RewriteStage } from './rewrite-stage.js';

// CoreDNS's edns0 tests read the options back from the reply of a next handler that echoes the
// request. Our replies carry our own OPT only: the options a rule sets go upstream with the
// question (checked where the tables check what the next handler got), never back to the client.
const echoed = Object.fromEntries(
  loadCases('rewrite')
    .serve.filter((c) => (c.expect.edns0?.length ?? 0) > 0 || (c.expect.edns0Includes?.length ?? 0) > 0)
    .map((c) => [c.name, 'our replies never carry the options of the question (they go upstream)']),
);

corednsCaseSuite('rewrite', {
  stage: (plugins) => new RewriteStage(() => plugins.rewrites),
  notOurs: {
    ...echoed,
    'TestEDNS0ResponseReverterNoOPT/local_replace_revert':
      'a query with an OPT gets one in our reply (RFC 6891 §7); the Go test writes around the server’s scrub',
  },
  refusedMatching: [
    [/\{server_(ip|port)\}/, 'the forwarder does not know the address a query arrived on; refused, naming the line'],
    [/\bcname\b/i, 'cname rules (a lookup of the rewritten target of its own) are refused, naming the line'],
  ],
});
