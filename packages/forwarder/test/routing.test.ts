import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeMessage, exchangeRaw, HEADER_BYTES, QTYPE, RCODE, writeName } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { startForwarder, upstream } from './harness.js';

/** A query whose name is written with the codec: `a\\.b` is one label of three octets. */
function rawQuery(name: string, type: number): Buffer {
  const qname = writeName(name);
  const out = Buffer.alloc(HEADER_BYTES + qname.length + 4);
  out.writeUInt16BE(0x1234, 0);
  out.writeUInt16BE(0x0100, 2);
  out.writeUInt16BE(1, 4);
  qname.copy(out, HEADER_BYTES);
  out.writeUInt16BE(type, HEADER_BYTES + qname.length);
  out.writeUInt16BE(1, HEADER_BYTES + qname.length + 2);
  return out;
}

describe('routing', () => {
  it.each([
    ['a dot', 'a\\.b.example.org.'],
    ['a space and a NUL', 'a\\032\\000b.example.org.'],
    ['octets above 0x7f', '\\200\\255.example.org.'],
  ])('forwards a label holding %s as the same octets, and takes the reply to it', async (_what, name) => {
    const up = await upstream({});
    const f = await startForwarder([`--server=${up.address}`]);
    const reply = decodeMessage(
      await exchangeRaw({ host: '127.0.0.1', port: f.port }, rawQuery(name, QTYPE.A), { timeoutMs: 3000 }),
    );
    // The upstream saw one label where the client sent one, and its NXDOMAIN came back (not a
    // SERVFAIL after the reply was dropped as answering another question).
    expect(up.queries.map((q) => q.name)).toEqual([name]);
    expect(reply.questions[0]?.name).toBe(name);
    expect(reply.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(f.forwarder.rejectedReplies()).toBe(0);
  });

  it('sends each name to its --server domain, longest suffix first, and the rest upstream', async () => {
    const cluster = await upstream({
      records: { 'web.shop.svc.cluster.local.': [{ type: QTYPE.A, address: '10.96.0.20' }] },
    });
    const deep = await upstream({ records: { 'a.sub.example.org.': [{ type: QTYPE.A, address: '192.0.2.2' }] } });
    const outside = await upstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] } });
    const f = await startForwarder([
      `--server=/cluster.local/${cluster.address}`,
      `--server=/sub.example.org/${deep.address}`,
      `--server=${outside.address}`,
    ]);
    expect(await f.resolver.resolve4('web.shop.svc.cluster.local')).toEqual(['10.96.0.20']);
    expect(await f.resolver.resolve4('a.sub.example.org')).toEqual(['192.0.2.2']);
    expect(await f.resolver.resolve4('example.org')).toEqual(['192.0.2.1']);
    expect(cluster.queries.map((q) => q.name)).toEqual(['web.shop.svc.cluster.local.']);
    expect(deep.queries.map((q) => q.name)).toEqual(['a.sub.example.org.']);
    expect(outside.queries.map((q) => q.name)).toEqual(['example.org.']);
  });

  it('answers NXDOMAIN itself for a local-only domain (--server=/domain/)', async () => {
    const f = await startForwarder(['--server=/blocked.example.net/']);
    const reply = await f.query('x.blocked.example.net', QTYPE.A);
    expect(reply.flags).toMatchObject({ rcode: RCODE.NXDOMAIN, ra: true });
  });

  it('sends stub domains from the ConfigMap to their servers and upstreamNameservers replace resolv.conf', async () => {
    const stub = await upstream({ records: { 'db.acme.local.': [{ type: QTYPE.A, address: '10.1.1.1' }] } });
    const configured = await upstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.9' }] } });
    const resolvUpstream = await upstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.66' }] } });
    const dir = await mkdtemp(join(tmpdir(), 'fw-cfg-'));
    await writeFile(join(dir, 'stubDomains'), JSON.stringify({ 'acme.local': [`127.0.0.1:${stub.port}`] }));
    await writeFile(join(dir, 'upstreamNameservers'), JSON.stringify([`127.0.0.1:${configured.port}`]));
    const resolv = join(dir, '..', `resolv-${stub.port}.conf`);
    await writeFile(resolv, 'nameserver 127.0.0.1\n');
    const f = await startForwarder([`--config-dir=${dir}`]);
    expect(await f.resolver.resolve4('db.acme.local')).toEqual(['10.1.1.1']);
    expect(await f.resolver.resolve4('example.org')).toEqual(['192.0.2.9']);
    expect(resolvUpstream.queries).toEqual([]);
  });

  it('chases an ExternalName CNAME out of the cluster zone and returns the whole chain', async () => {
    const cluster = await upstream({
      records: {
        'payments.shop.svc.cluster.local.': [{ type: QTYPE.CNAME, target: 'payments.example.org.', ttl: 30 }],
      },
    });
    const outside = await upstream({
      records: { 'payments.example.org.': [{ type: QTYPE.A, address: '192.0.2.50', ttl: 300 }] },
    });
    const f = await startForwarder([`--server=/cluster.local/${cluster.address}`, `--server=${outside.address}`]);
    const reply = await f.query('payments.shop.svc.cluster.local', QTYPE.A);
    expect(reply.answers.map((a) => [a.type, a.target ?? a.address])).toEqual([
      [QTYPE.CNAME, 'payments.example.org.'],
      [QTYPE.A, '192.0.2.50'],
    ]);
    expect(await f.resolver.resolve4('payments.shop.svc.cluster.local')).toEqual(['192.0.2.50']);
  });

  it('asks upstream for reverse names the cluster answers NXDOMAIN or REFUSED for', async () => {
    const cluster = await upstream({
      records: { '1.0.96.10.in-addr.arpa.': [{ type: QTYPE.PTR, target: 'kubernetes.default.svc.cluster.local.' }] },
    });
    const outside = await upstream({
      records: { '8.2.0.192.in-addr.arpa.': [{ type: QTYPE.PTR, target: 'host.example.org.' }] },
    });
    const f = await startForwarder([`--server=/in-addr.arpa/${cluster.address}`, `--server=${outside.address}`]);
    expect(await f.resolver.reverse('10.96.0.1')).toEqual(['kubernetes.default.svc.cluster.local']);
    expect(await f.resolver.reverse('192.0.2.8')).toEqual(['host.example.org']);
    expect(outside.queries.map((q) => q.name)).toEqual(['8.2.0.192.in-addr.arpa.']);
    cluster.set({ behaviour: 'refused' });
    outside.set({ records: { '9.2.0.192.in-addr.arpa.': [{ type: QTYPE.PTR, target: 'other.example.org.' }] } });
    expect(await f.resolver.reverse('192.0.2.9')).toEqual(['other.example.org']);
  });

  it('echoes the client case and answers CHAOS statistics like dnsmasq', async () => {
    const outside = await upstream({ records: { 'example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] } });
    const f = await startForwarder([`--server=${outside.address}`, '--cache-size=1000']);
    const reply = await f.query('ExAmPlE.org', QTYPE.A);
    expect(reply.questions[0]?.name).toBe('ExAmPlE.org.');
    expect(reply.flags).toMatchObject({ ra: true, rcode: RCODE.NOERROR });
    expect(await f.stat('cachesize')).toEqual(['1000']);
    expect(await f.stat('servers')).toEqual([`${outside.address} 1 0`]);
    expect(await f.stat('misses')).toEqual(['1']);
  });
});
