import { fixtures, hasCommand, runChecked } from '@cluster-dns/testkit';
import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { resolveCode, startRecordBuilder } from './harness.js';

const Z = 'svc.cluster.local';
const cluster = [
  fixtures.service('default', 'kubernetes', { clusterIPs: ['10.96.0.1'], ports: [{ name: 'https', port: 443 }] }),
  fixtures.service('shop', 'api', {
    clusterIPs: ['10.96.10.30', 'fd00:10:96::30'],
    ports: [{ name: 'http', port: 8080 }],
  }),
  fixtures.service('shop', 'statsd', {
    clusterIPs: ['10.96.10.25'],
    ports: [{ name: 'statsd', port: 8125, protocol: 'UDP' }],
  }),
  fixtures.service('shop', 'payments', { externalName: 'payments.example.org' }),
  fixtures.service('data', 'pg', { headless: true, ports: [{ name: 'pg', port: 5432 }] }),
  fixtures.endpointSlice(
    'data',
    'pg',
    'pg-1',
    [
      { addresses: ['10.244.1.31'], hostname: 'pg-0' },
      { addresses: ['10.244.2.32'], hostname: 'pg-1', ready: false },
    ],
    { ports: [{ name: 'pg', port: 5432 }] },
  ),
  fixtures.service('data', 'wide', { headless: true }),
  fixtures.endpointSlice(
    'data',
    'wide',
    'wide-1',
    Array.from({ length: 100 }, (_, i) => ({ addresses: [`10.245.0.${i + 1}`] })),
  ),
];

describe('record-builder process answers node:dns (c-ares) over UDP and TCP', () => {
  it('answers every kind of record the spec defines', async () => {
    const rb = await startRecordBuilder(cluster);
    const r = rb.resolver;
    expect(await r.resolve4(`kubernetes.default.${Z}`)).toEqual(['10.96.0.1']);
    expect(await r.resolve4(`api.shop.${Z}`)).toEqual(['10.96.10.30']);
    expect(await r.resolve6(`api.shop.${Z}`)).toEqual(['fd00:10:96::30']);
    expect(await r.resolveSrv(`_statsd._udp.statsd.shop.${Z}`)).toEqual([
      { name: `statsd.shop.${Z}`, port: 8125, priority: 10, weight: 100 },
    ]);
    expect(await r.resolveSrv(`kubernetes.default.${Z}`)).toHaveLength(1);
    expect(await r.reverse('10.96.10.30')).toEqual([`api.shop.${Z}`]);
    expect(await r.reverse('fd00:10:96::30')).toEqual([`api.shop.${Z}`]);
    expect(await r.resolveCname(`payments.shop.${Z}`)).toEqual(['payments.example.org']);
    expect(await r.resolve4(`pg.data.${Z}`)).toEqual(['10.244.1.31']);
    expect(await r.resolve4(`pg-0.pg.data.${Z}`)).toEqual(['10.244.1.31']);
    expect(await r.resolveSrv(`_pg._tcp.pg.data.${Z}`)).toEqual([
      { name: `pg-0.pg.data.${Z}`, port: 5432, priority: 10, weight: 100 },
    ]);
    expect(await r.reverse('10.244.1.31')).toEqual([`pg-0.pg.data.${Z}`]);
    expect(await r.resolveTxt('dns-version.cluster.local')).toEqual([['1.1.0']]);
    expect(await r.resolve4('10-244-3-3.shop.pod.cluster.local')).toEqual(['10.244.3.3']);
    expect(await resolveCode(r.resolve4(`pg-1.pg.data.${Z}`))).toBe('ENOTFOUND');
    expect(await resolveCode(r.resolve4(`nope.shop.${Z}`))).toBe('ENOTFOUND');
    expect(await resolveCode(r.resolve6(`kubernetes.default.${Z}`))).toBe('ENODATA');
    expect(await resolveCode(r.resolve4(`shop.${Z}`))).toBe('ENODATA');
    expect(await resolveCode(r.resolve4('example.org'))).toBe('EREFUSED');
    expect(await resolveCode(r.reverse('192.0.2.99'))).toBe('ENOTFOUND');
  });

  it('answers over TCP with several queries on one connection too', async () => {
    const rb = await startRecordBuilder(cluster);
    const reply = await rb.query(`KUBERNETES.default.${Z}`, QTYPE.A, { transport: 'tcp' });
    expect(reply.flags).toMatchObject({ aa: true, rcode: RCODE.NOERROR });
    expect(reply.questions[0]?.name).toBe(`KUBERNETES.default.${Z}.`);
    expect(reply.answers.map((a) => [a.address, a.ttl])).toEqual([['10.96.0.1', 30]]);
    const nx = await rb.query(`nope.default.${Z}`, QTYPE.A, { transport: 'tcp' });
    expect(nx.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(nx.authorities[0]?.soa?.minimum).toBe(30);
  });

  it('truncates 100 headless endpoints over UDP to whole records, and c-ares gets all by retrying over TCP', async () => {
    const rb = await startRecordBuilder(cluster);
    const udp = await rb.query(`wide.data.${Z}`, QTYPE.A);
    expect(udp.flags.tc).toBe(true);
    expect(udp.answers.length).toBeGreaterThan(20);
    // Asked with 4096, answered within the 1232 default of --edns-packet-max.
    const edns = await rb.query(`wide.data.${Z}`, QTYPE.A, { edns: { udpSize: 4096 } });
    expect(edns.flags.tc).toBe(true);
    expect(edns.additionals.find((r) => r.type === QTYPE.OPT)?.class).toBe(1232);
    expect((await rb.resolver.resolve4(`wide.data.${Z}`)).length).toBe(100);
  });

  it('sends larger UDP replies when --edns-packet-max allows them', async () => {
    const rb = await startRecordBuilder(cluster, ['--edns-packet-max=4096']);
    const edns = await rb.query(`wide.data.${Z}`, QTYPE.A, { edns: { udpSize: 4096 } });
    expect(edns.flags.tc).toBe(false);
    expect(edns.answers).toHaveLength(100);
    expect(edns.additionals.find((r) => r.type === QTYPE.OPT)?.class).toBe(4096);
  });

  it('answers dig the same way, when dig is installed', async () => {
    const rb = await startRecordBuilder(cluster);
    const hasDig = hasCommand('dig');
    // Without dig the c-ares checks above stand alone; with it, a second independent client agrees.
    const digAnswer = hasDig
      ? (await runChecked('dig', ['@127.0.0.1', '-p', String(rb.dnsPort), '+short', `kubernetes.default.${Z}`])).trim()
      : (await rb.resolver.resolve4(`kubernetes.default.${Z}`)).join('\n');
    expect(digAnswer).toBe('10.96.0.1');
    if (hasDig) {
      const tcp = await runChecked('dig', [
        '@127.0.0.1',
        '-p',
        String(rb.dnsPort),
        '+tcp',
        '+short',
        'SRV',
        `_pg._tcp.pg.data.${Z}`,
      ]);
      expect(tcp.trim()).toBe(`10 100 5432 pg-0.pg.data.${Z}.`);
    }
  });
});
