import { readFileSync } from 'node:fs';
import { readCorefile } from '@cluster-dns/runtime';
import {
  buildQueryMessage,
  type DecodedRr,
  decodeMessage,
  encodeMessage,
  parseRecordText,
  QTYPE,
  RCODE,
  type Rr,
  recordText,
  toFqdn,
  typeFromText,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { recordBuilderFromCorefile } from './corefile-options.js';
import { toServiceInfo } from './kube-objects.js';
import { createTestZone, group } from './test-zone.js';

// CoreDNS's k8s_external tests (external_test.go, apex_test.go, transfer_test.go, setup_test.go),
// translated into data (testdata/k8s-external-cases.json, its notes say how), asked through the
// record-builder's real chain.

interface CaseService {
  namespace: string;
  name: string;
  type: string;
  clusterIPs: string[];
  externalIPs?: string[];
  ports: { name: string; protocol: string; port: number }[];
  endpoints?: {
    addresses: { ip: string; hostname?: string }[];
    ports: { name: string; protocol: string; port: number }[];
  }[];
}

interface ServeCase {
  name: string;
  corefile: string;
  services?: CaseService[];
  nameserverAddresses?: string[];
  query: { name: string; type: string; serial?: number };
  expect: { rcode?: string; answer?: string[]; authority?: string[]; additional?: string[] };
}

interface SetupCase {
  name: string;
  corefile: string;
  valid: boolean;
  expectConfig: { zone0?: string; apex: string; headless: boolean; fallthrough: string[] };
}

const cases = JSON.parse(readFileSync(new URL('./testdata/k8s-external-cases.json', import.meta.url), 'utf8')) as {
  setup: SetupCase[];
  serve: ServeCase[];
};

/** Records as CoreDNS's test.SortAndCheck compares them: an SOA by its owner, TTL and primary only. */
const compared = (rr: DecodedRr) =>
  rr.type === QTYPE.SOA && rr.soa
    ? `${rr.name.toLowerCase()} ${rr.ttl} SOA ${rr.soa.primary.toLowerCase()}`
    : recordText({ ...rr, name: rr.name.toLowerCase() } as DecodedRr);
const sorted = (rrs: readonly DecodedRr[]) =>
  rrs
    .filter((r) => r.type !== QTYPE.OPT)
    .map(compared)
    .sort();
const expected = (texts: readonly string[] | undefined) => sorted((texts ?? []).map((t) => parseRecordText(t)));

function zoneFor(c: ServeCase) {
  const corefile = recordBuilderFromCorefile(`. {\n${c.corefile}\n}\n`, '/corefile/Corefile');
  const t = createTestZone({
    ttl: 5,
    transferTo: ['127.0.0.1'],
    external: corefile.external,
    externalReverseZones: corefile.externalReverseZones,
    ...(corefile.namespaces ? { exposedNamespaces: [...corefile.namespaces] } : {}),
  });
  for (const s of c.services ?? []) {
    const info = toServiceInfo({
      metadata: { namespace: s.namespace, name: s.name },
      spec: {
        type: s.type,
        clusterIPs: s.clusterIPs,
        ...(s.externalIPs?.every((a) => /^[\d.:a-f]+$/i.test(a)) ? { externalIPs: s.externalIPs } : {}),
        ports: s.ports.map((p) => ({ ...p, protocol: p.protocol.toUpperCase() })),
      },
      // A LoadBalancer ingress host name (svc12's "dummy.hostname") comes from the status.
      ...(s.externalIPs?.some((a) => !/^[\d.:a-f]+$/i.test(a))
        ? { status: { loadBalancer: { ingress: s.externalIPs.map((a) => ({ hostname: a })) } } }
        : {}),
    });
    if (!info) throw new Error(`case service ${s.name} did not convert`);
    t.state.upsertService(info);
    for (const [i, e] of (s.endpoints ?? []).entries())
      t.state.upsertGroup(
        group(
          s.namespace,
          s.name,
          e.addresses.map((a) => ({ ip: a.ip, ...(a.hostname ? { hostname: a.hostname } : {}) })),
          e.ports.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol.toLowerCase() as 'tcp' })),
          `${s.name}-${i}`,
        ),
      );
  }
  // The name server's address: the DNS Service's (kube-system/kube-dns in the test zone).
  if (c.nameserverAddresses)
    t.state.upsertService({
      namespace: 'kube-system',
      name: 'kube-dns',
      kind: 'cluster-ip',
      clusterIPs: ['10.96.0.10'],
      externalName: undefined,
      ports: [],
      publishNotReady: false,
      externalAddresses: c.nameserverAddresses,
    });
  return t;
}

describe('k8s_external, against CoreDNS’s own tables (testdata/k8s-external-cases.json)', () => {
  it.each(cases.setup.map((c) => [c.name, c] as const))('setup: %s', (_name, c) => {
    const [block] = readCorefile(`example.net {\n${c.corefile}\n}\n`, { mode: 'pod' });
    const config = block?.k8sExternal;
    expect(config).toBeDefined();
    expect(config?.apex).toBe(c.expectConfig.apex);
    expect(config?.headless).toBe(c.expectConfig.headless);
    if (c.expectConfig.zone0) expect(config?.zones?.[0]).toBe(c.expectConfig.zone0);
    const fall = c.expectConfig.fallthrough;
    if (fall.length === 0) expect(config?.fallthrough).toBeUndefined();
    else if (fall[0] === '.') expect(config?.fallthrough?.length ?? -1).toBeLessThanOrEqual(1);
    else expect(config?.fallthrough).toEqual(fall);
  });

  it.each(cases.serve.map((c) => [c.name, c] as const))('serve: %s', (_name, c) => {
    const t = zoneFor(c);
    const type = typeFromText(c.query.type) as number;
    if (type === QTYPE.AXFR || type === QTYPE.IXFR) {
      // A transfer over TCP from an address allowed; the SOA serial is ours, not the Go test's constant.
      const q = buildQueryMessage(7, c.query.name, type);
      if (type === QTYPE.IXFR)
        q.authorities.push(
          parseRecordText(
            `${c.query.name} 5 IN SOA ns1.dns.${c.query.name} hostmaster.dns.${c.query.name} ${t.state.serial} 7200 1800 86400 5`,
          ) as Rr,
        );
      const messages = t.messages(encodeMessage(q), '127.0.0.1');
      const records = messages.flatMap((m) => decodeMessage(m).answers);
      // The set of records, as the Go test compares it (the SOA opens and closes an AXFR).
      expect(new Set(sorted(records))).toEqual(new Set(expected(c.expect.answer)));
      return;
    }
    const reply = t.ask(c.query.name, type);
    expect(reply.flags.rcode).toBe(RCODE[(c.expect.rcode ?? 'NOERROR') as keyof typeof RCODE]);
    expect(reply.flags.aa).toBe(true);
    expect(sorted(reply.answers)).toEqual(expected(c.expect.answer));
    expect(sorted(reply.authorities)).toEqual(expected(c.expect.authority));
    if (c.expect.additional) expect(sorted(reply.additionals)).toEqual(expected(c.expect.additional));
  });

  it('keeps the cluster’s own answers: a reverse name of a cluster IP, and names under the cluster zone', () => {
    const t = zoneFor({
      name: 'ours',
      corefile: 'kubernetes cluster.local\nk8s_external example.com in-addr.arpa',
      services: [
        {
          namespace: 'default',
          name: 'web',
          type: 'LoadBalancer',
          clusterIPs: ['10.96.5.5'],
          externalIPs: ['203.0.113.9'],
          ports: [{ name: 'http', protocol: 'tcp', port: 80 }],
        },
      ],
      query: { name: '', type: 'A' },
      expect: {},
    });
    expect(t.ask('5.5.96.10.in-addr.arpa', QTYPE.PTR).answers.map((a) => a.target)).toEqual([
      toFqdn('web.default.svc.cluster.local'),
    ]);
    expect(t.ask('9.113.0.203.in-addr.arpa', QTYPE.PTR).answers.map((a) => a.target)).toEqual([
      toFqdn('web.default.example.com'),
    ]);
    expect(t.ask('web.default.svc.cluster.local').answers.map((a) => a.address)).toEqual(['10.96.5.5']);
    expect(t.ask('web.default.example.com').answers.map((a) => a.address)).toEqual(['203.0.113.9']);
    // A change of the external address is answered at once (the Service owns the cached answer).
    const web = t.state.service('default', 'web');
    if (web) t.state.upsertService({ ...web, externalAddresses: ['203.0.113.10'] });
    expect(t.ask('web.default.example.com').answers.map((a) => a.address)).toEqual(['203.0.113.10']);
  });
});
