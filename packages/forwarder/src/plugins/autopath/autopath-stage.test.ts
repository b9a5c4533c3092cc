import { Buffer } from 'node:buffer';
import {
  buildQueryMessage,
  CLIENT_ADDRESS_OPTION,
  chainStages,
  clientAddressOf,
  createQueryPipeline,
  decodeMessage,
  encodeClientAddress,
  encodeMessage,
  encodeOptRecord,
  type Fqdn,
  finishFromTemplate,
  QTYPE,
  RCODE,
  type Rr,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { askThrough } from '../../testing/test-chain.js';
import { AutopathStage } from './autopath-stage.js';
import { chainFirst, firstStepOf, firstStepTest, restOfWalk, searchDomainsOf } from './search-path.js';

const ZONE = toFqdn('cluster.local');
const SOA: Rr = {
  name: 'cluster.local.',
  type: QTYPE.SOA,
  class: 1,
  ttl: 5,
  soa: {
    primary: 'ns.dns.cluster.local.',
    admin: 'h.cluster.local.',
    serial: 1,
    refresh: 1,
    retry: 1,
    expiration: 1,
    minimum: 5,
  },
};
const txt = (name: string, ns: string, search: string): Rr => ({
  name,
  type: QTYPE.TXT,
  class: 1,
  ttl: 30,
  text: [`namespace=${ns}`, `search=${search}`],
});
const a = (name: string, address: string, ttl = 60): Rr => ({ name, type: QTYPE.A, class: 1, ttl, address });

/** What the zones behind the stage hold, by name: every other name is NXDOMAIN. */
const ZONES: Record<string, Rr[]> = {
  '10-244-1-5.client.dns.cluster.local.': [txt('10-244-1-5.client.dns.cluster.local.', 'testns', 'default')],
  '10-244-1-6.client.dns.cluster.local.': [txt('10-244-1-6.client.dns.cluster.local.', 'testns', 'own')],
  'web.other.svc.cluster.local.': [a('web.other.svc.cluster.local.', '10.96.0.20', 30)],
  'web.testns.svc.cluster.local.': [a('web.testns.svc.cluster.local.', '10.96.0.21', 30)],
  'api.example.com.': [a('api.example.com.', '192.0.2.10', 300)],
  'files.corp.example.': [a('files.corp.example.', '192.0.2.30')],
  'files.': [a('files.', '192.0.2.31')],
};

/** The stage in front of a fake of everything after it; `asked` lists each question it passed on. */
function walker(extraSearch: string[] = [], trusted = false, servedBySchema?: (name: Fqdn) => boolean) {
  const asked: { name: Fqdn; qtype: number; own: boolean }[] = [];
  const stage = new AutopathStage(
    { zone: ZONE, extraSearch: extraSearch.map((d) => toFqdn(d)) },
    (request) => {
      const named = trusted ? clientAddressOf(request.query.raw) : undefined;
      return named ? { address: named, carried: true } : { address: request.context.remoteAddress, carried: false };
    },
    servedBySchema,
  );
  const behind = (request: ForwarderRequest) => {
    const q = request.query;
    asked.push({ name: q.key, qtype: q.qtype, own: request.ownQuestion === true });
    const rrs = ZONES[q.key];
    if (!rrs) {
      const wire = encodeMessage({
        id: 0,
        flags: {
          qr: true,
          opcode: 0,
          aa: false,
          tc: false,
          rd: true,
          ra: true,
          ad: false,
          cd: false,
          rcode: RCODE.NXDOMAIN,
        },
        questions: [{ name: q.key, type: q.qtype, class: 1 }],
        answers: [],
        authorities: [SOA],
        additionals: [],
      });
      return finishFromTemplate(wire, q, request.limitBytes, { udpPayloadBytes: 1232 });
    }
    const answers = rrs.filter((r) => r.type === q.qtype);
    const wire = encodeMessage({
      id: 0,
      flags: { qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0 },
      questions: [{ name: q.key, type: q.qtype, class: 1 }],
      answers,
      authorities: answers.length ? [] : [SOA],
      additionals: [],
    });
    return finishFromTemplate(wire, q, request.limitBytes, { udpPayloadBytes: 1232 });
  };
  const ask = askThrough(chainStages<ForwarderRequest>([stage], behind));
  const from = (address: string) => ({
    context: { transport: 'udp' as const, remoteAddress: address, remotePort: 5353, family: 4 as const },
  });
  return { stage, asked, ask, from, behind };
}

describe('autopath: a pod’s search walk done on the server', () => {
  it('answers the first step of a walk for an outside name with a CNAME to it and its records, asking each step once, in the pod’s order', async () => {
    const w = walker();
    const reply = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers.map((r) => [r.name, r.type, r.target ?? r.address])).toEqual([
      ['api.example.com.testns.svc.cluster.local.', QTYPE.CNAME, 'api.example.com.'],
      ['api.example.com.', QTYPE.A, '192.0.2.10'],
    ]);
    // The CNAME expires with the answer it leads to.
    expect(reply.answers[0]?.ttl).toBe(300);
    expect(w.asked.map((q) => q.name)).toEqual([
      '10-244-1-5.client.dns.cluster.local.',
      'api.example.com.testns.svc.cluster.local.',
      'api.example.com.svc.cluster.local.',
      'api.example.com.cluster.local.',
      'api.example.com.',
    ]);
    // Every step but the asked question itself is the forwarder's own: no client address goes with it.
    expect(w.asked.map((q) => q.own)).toEqual([true, false, true, true, true]);
    expect(w.stage.counts).toEqual({ walked: 1, found: 1, skipped: 0 });
  });

  it('gives AAAA the same step as A: NODATA through the same CNAME when the name has no AAAA', async () => {
    const w = walker();
    const reply = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.AAAA, w.from('10.244.1.5'));
    expect(reply.flags.rcode).toBe(RCODE.NOERROR);
    expect(reply.answers.map((r) => [r.type, r.target])).toEqual([[QTYPE.CNAME, 'api.example.com.']]);
    expect(reply.authorities.map((r) => r.type)).toEqual([QTYPE.SOA]);
  });

  it('finds a short name in another namespace (`web.other`) at svc.<zone>', async () => {
    const w = walker();
    const reply = await w.ask('web.other.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.answers.map((r) => r.target ?? r.address)).toEqual(['web.other.svc.cluster.local.', '10.96.0.20']);
  });

  it('answers a first step that exists as it is, with no CNAME, and asks the other cluster steps beside it, never the outside ones', async () => {
    const w = walker();
    const reply = await w.ask('web.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.answers.map((r) => [r.name, r.address])).toEqual([['web.testns.svc.cluster.local.', '10.96.0.21']]);
    // The cluster's steps go at once (one round trip to the record-builder, each kept by the cache).
    expect(w.asked.map((q) => q.name)).toEqual([
      '10-244-1-5.client.dns.cluster.local.',
      'web.testns.svc.cluster.local.',
      'web.svc.cluster.local.',
      'web.cluster.local.',
    ]);
  });

  it('skips the <zone> step the Kubernetes schema rules out, where the zone’s own server answers it', async () => {
    const w = walker([], false, () => true);
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).not.toContain('api.example.com.cluster.local.');
    // A typed name ending in svc or pod can exist directly under the zone: asked.
    await w.ask('web.shop.svc.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).toContain('web.shop.svc.cluster.local.');
    // Another route serving the name (a stub domain inside the zone): asked.
    const stub = walker([], false, () => false);
    await stub.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, stub.from('10.244.1.5'));
    expect(stub.asked.map((q) => q.name)).toContain('api.example.com.cluster.local.');
  });

  it('never sends a name the cluster has to the upstreams', async () => {
    const w = walker(['corp.example']);
    await w.ask('web.other.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).not.toContain('web.other.');
    expect(w.asked.map((q) => q.name)).not.toContain('web.other.corp.example.');
  });

  it('answers NXDOMAIN for a name at no step, so the pod walks on as without autopath', async () => {
    const w = walker();
    const reply = await w.ask('nothing.example.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(reply.answers).toEqual([]);
    expect(w.asked.map((q) => q.name).at(-1)).toBe('nothing.example.');
    expect(w.stage.counts).toEqual({ walked: 1, found: 0, skipped: 0 });
  });

  it.each([
    ['a pod with its own dnsConfig', '10.244.1.6'],
    ['an address the client map does not know (a hostNetwork pod, a node)', '10.244.1.9'],
  ])('does not walk for %s', async (_who, address) => {
    const w = walker();
    const reply = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from(address));
    expect(reply.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(w.asked.map((q) => q.name).slice(1)).toEqual(['api.example.com.testns.svc.cluster.local.']);
    expect(w.stage.counts.skipped).toBe(1);
  });

  it('does not walk a question naming another namespace than the asker’s (not its first step)', async () => {
    const w = walker();
    const reply = await w.ask('api.example.com.other.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(w.stage.counts).toEqual({ walked: 0, found: 0, skipped: 1 });
  });

  it('passes every other shape on without reading the client map', async () => {
    const w = walker();
    for (const name of [
      'api.example.com',
      'web.svc.cluster.local',
      'testns.svc.cluster.local',
      'a.b.pod.cluster.local',
    ])
      await w.ask(name, QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).toEqual([
      'api.example.com.',
      'web.svc.cluster.local.',
      'testns.svc.cluster.local.',
      'a.b.pod.cluster.local.',
    ]);
  });

  it('walks the node’s search domains after the cluster’s and before the name itself', async () => {
    const w = walker(['corp.example']);
    const reply = await w.ask('files.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.answers.map((r) => r.target ?? r.address)).toEqual(['files.corp.example.', '192.0.2.30']);
  });

  it('walks for the pod a trusted node cache names, and names it back so the node cache keeps the answer to itself', async () => {
    const w = walker([], true);
    // The node cache's query: its own address as the source, the pod in the option.
    const message = encodeMessage(buildQueryMessage(9, 'api.example.com.testns.svc.cluster.local', QTYPE.A));
    const opt = encodeOptRecord({
      udpSize: 1232,
      option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress('10.244.1.5') },
    });
    const raw = Buffer.concat([message, opt]);
    raw.writeUInt16BE(1, 10);
    const pipeline = createQueryPipeline({
      handle: chainStages<ForwarderRequest>([w.stage], w.behind),
      recursionAvailable: true,
      classes: [1],
      opcodes: [0],
    });
    const reply = (await pipeline(raw, w.from('192.168.0.10').context)) as Buffer;
    expect(decodeMessage(reply).answers.map((r) => r.target ?? r.address)).toEqual(['api.example.com.', '192.0.2.10']);
    expect(clientAddressOf(reply)).toBe('10.244.1.5');
    // Its own steps carry nobody: the Pod's forwarder behind never walks them again.
    expect(w.asked.filter((q) => q.name !== 'api.example.com.testns.svc.cluster.local.').every((q) => q.own)).toBe(
      true,
    );
  });

  it('names nobody back in an answer for the asker itself', async () => {
    const w = walker();
    const { raw } = await (async () => ({
      raw: encodeMessage(
        buildQueryMessage(9, 'api.example.com.testns.svc.cluster.local', QTYPE.A, { edns: { udpSize: 1232 } }),
      ),
    }))();
    const pipeline = createQueryPipeline({
      handle: chainStages<ForwarderRequest>([w.stage], w.behind),
      recursionAvailable: true,
      classes: [1],
      opcodes: [0],
    });
    const reply = (await pipeline(raw, w.from('10.244.1.5').context)) as Buffer;
    expect(decodeMessage(reply).answers).toHaveLength(2);
    expect(clientAddressOf(reply)).toBeUndefined();
  });
});

describe('search-path.ts', () => {
  it('reads a first step: the label before svc is the namespace, the rest what was typed', () => {
    expect(firstStepOf(toFqdn('api.example.com.testns.svc.cluster.local'), ZONE)).toEqual({
      base: 'api.example.com',
      namespace: 'testns',
    });
    expect(firstStepOf(toFqdn('testns.svc.cluster.local'), ZONE)).toBeUndefined();
    expect(firstStepOf(toFqdn('svc.cluster.local'), ZONE)).toBeUndefined();
    expect(firstStepOf(toFqdn('api.example.com'), ZONE)).toBeUndefined();
    expect(restOfWalk({ base: 'web', namespace: 'a' }, ZONE, [toFqdn('corp.example')])).toEqual([
      'web.svc.cluster.local.',
      'web.cluster.local.',
      'web.corp.example.',
      'web.',
    ]);
  });

  it('lets an express lane answer every cached reply but an NXDOMAIN that may be a first step', () => {
    const test = firstStepTest({ zone: ZONE, extraSearch: [] });
    const query = (name: string) =>
      encodeMessage({
        id: 1,
        flags: { qr: false, opcode: 0, aa: false, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
        questions: [{ name, type: 1, class: 1 }],
        answers: [],
        authorities: [],
        additionals: [],
      });
    const reply = (rcode: number) => Buffer.from([0, 1, 0x81, 0x80 | rcode]);
    expect(test(query('API.example.com.TestNS.svc.cluster.local'), reply(RCODE.NXDOMAIN))).toBe(true);
    expect(test(query('web.testns.svc.cluster.local'), reply(RCODE.NOERROR))).toBe(false);
    expect(test(query('api.example.com.cluster.local'), reply(RCODE.NXDOMAIN))).toBe(false);
  });

  it('sends the chain every cached TXT or ANY of the client map, whatever autopath says', () => {
    const query = (name: string, type: number) =>
      encodeMessage({
        id: 1,
        flags: { qr: false, opcode: 0, aa: false, tc: false, rd: true, ra: false, ad: false, cd: false, rcode: 0 },
        questions: [{ name, type, class: 1 }],
        answers: [],
        authorities: [],
        additionals: [],
      });
    const ok = Buffer.from([0, 1, 0x81, 0x80]);
    const test = chainFirst(ZONE);
    const map = '10-244-1-5.Client.DNS.cluster.local';
    expect(test(query(map, QTYPE.TXT), ok, QTYPE.TXT)).toBe(true);
    expect(test(query(map, QTYPE.ANY), ok, QTYPE.ANY)).toBe(true);
    expect(test(query('txt.example.org', QTYPE.TXT), ok, QTYPE.TXT)).toBe(false);
    expect(test(query('web.shop.svc.cluster.local', QTYPE.A), ok, QTYPE.A)).toBe(false);
  });

  it('reads the node’s search domains from a resolv.conf: the last search or domain line', () => {
    expect(searchDomainsOf('nameserver 10.0.0.2\nsearch ec2.internal corp.example\noptions ndots:2\n')).toEqual([
      'ec2.internal.',
      'corp.example.',
    ]);
    expect(searchDomainsOf('domain a.example\nsearch b.example\n')).toEqual(['b.example.']);
    expect(searchDomainsOf('nameserver 10.0.0.2\n')).toEqual([]);
  });
});
