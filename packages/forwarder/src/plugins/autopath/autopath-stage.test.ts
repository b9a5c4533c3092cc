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
  OPT_RECORD_BYTES,
  PlainQuestion,
  QTYPE,
  RCODE,
  type Rr,
  readPlainQuery,
  toFqdn,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { askThrough } from '../../testing/test-chain.js';
import { AutopathStage } from './autopath-stage.js';
import { KeptWalks } from './kept-walks.js';
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
  '10-244-2-5.client.dns.cluster.local.': [txt('10-244-2-5.client.dns.cluster.local.', 'shop', 'default')],
  '10-244-1-6.client.dns.cluster.local.': [txt('10-244-1-6.client.dns.cluster.local.', 'testns', 'own')],
  'web.other.svc.cluster.local.': [a('web.other.svc.cluster.local.', '10.96.0.20', 30)],
  'web.testns.svc.cluster.local.': [a('web.testns.svc.cluster.local.', '10.96.0.21', 30)],
  'api.example.com.': [a('api.example.com.', '192.0.2.10', 300)],
  'files.corp.example.': [a('files.corp.example.', '192.0.2.30')],
  'files.': [a('files.', '192.0.2.31')],
};

/** The stage in front of a fake of everything after it; `asked` lists each question it passed on. */
function walker(
  extraSearch: string[] = [],
  trusted = false,
  servedBySchema?: (name: Fqdn) => boolean,
  kept?: KeptWalks,
) {
  const asked: { name: Fqdn; qtype: number; own: boolean }[] = [];
  const stage = new AutopathStage(
    { zone: ZONE, extraSearch: extraSearch.map((d) => toFqdn(d)) },
    (raw, remoteAddress) => {
      const named = trusted ? clientAddressOf(raw) : undefined;
      return named ? { address: named, carried: true } : { address: remoteAddress, carried: false };
    },
    servedBySchema,
    kept,
  );
  const behind = (request: ForwarderRequest) => {
    const q = request.query;
    asked.push({ name: q.key, qtype: q.qtype, own: request.ownQuestion === true });
    // An empty non-terminal (a name with names below it) exists, as on an authoritative server.
    const rrs = ZONES[q.key] ?? (Object.keys(ZONES).some((n) => n.endsWith(`.${q.key}`)) ? [] : undefined);
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
    expect(w.stage.counts).toEqual({ walked: 1, found: 1, kept: 0, skipped: 0 });
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
    expect(w.stage.counts).toEqual({ walked: 1, found: 0, kept: 0, skipped: 0 });
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
    expect(w.stage.counts).toEqual({ walked: 0, found: 0, kept: 0, skipped: 1 });
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

describe('autopath: walked answers kept per asking namespace', () => {
  /** A walker whose kept walks read a clock and a drop count the test moves. */
  const keeping = () => {
    const clock = { ms: 1_000_000, drops: 0 };
    const kept = new KeptWalks({ drops: () => clock.drops, now: () => clock.ms, maxEntries: 100 });
    return { ...walker([], false, () => true, kept), clock, kept };
  };
  const names = (w: { asked: { name: Fqdn }[] }) => w.asked.map((q) => q.name);

  it('answers a warm walked lookup from the kept walk and the kept client entry: nothing asked again, the TTL counting down', async () => {
    const w = keeping();
    const first = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    w.asked.length = 0;
    w.clock.ms += 7_400;
    const again = await w.ask('API.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(names(w)).toEqual([]);
    expect(again.answers.map((r) => [r.name, r.type, r.target ?? r.address])).toEqual([
      ['API.example.com.testns.svc.cluster.local.', QTYPE.CNAME, 'api.example.com.'],
      ['api.example.com.', QTYPE.A, '192.0.2.10'],
    ]);
    expect(first.answers.map((r) => r.ttl)).toEqual([300, 300]);
    expect(again.answers.map((r) => r.ttl)).toEqual([293, 293]);
    expect(w.stage.counts).toEqual({ walked: 2, found: 2, kept: 1, skipped: 0 });
  });

  it('keeps A and AAAA apart: the AAAA walk is walked on its own', async () => {
    const w = keeping();
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    w.asked.length = 0;
    const aaaa = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.AAAA, w.from('10.244.1.5'));
    expect(aaaa.answers.map((r) => r.type)).toEqual([QTYPE.CNAME]);
    expect(names(w)).toContain('api.example.com.');
    expect(w.stage.counts.kept).toBe(0);
  });

  it('never serves a walk kept for one namespace to a pod of another: that pod asking the name in full gets the NXDOMAIN', async () => {
    const w = keeping();
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    // A pod of `shop` asks testns's first step by its full name: not a walk of its own, so the cluster's answer.
    const other = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.2.5'));
    expect(other.flags.rcode).toBe(RCODE.NXDOMAIN);
    expect(other.answers).toEqual([]);
    // An unknown asker too.
    const unknown = await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.9.9'));
    expect(unknown.flags.rcode).toBe(RCODE.NXDOMAIN);
    // And shop's own walk of the name is its own: walked, kept apart.
    w.asked.length = 0;
    const shop = await w.ask('api.example.com.shop.svc.cluster.local', QTYPE.A, w.from('10.244.2.5'));
    expect(shop.answers[0]?.target).toBe('api.example.com.');
    expect(names(w)).toContain('api.example.com.shop.svc.cluster.local.');
    expect(w.stage.counts).toEqual({ walked: 2, found: 2, kept: 0, skipped: 2 });
    expect(w.kept.size).toBe(2);
  });

  it('walks again after the cache drops anything (a push) and after the answer’s TTL', async () => {
    const w = keeping();
    const walk = () => w.ask('web.other.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    await walk();
    w.clock.drops++;
    w.asked.length = 0;
    const afterPush = await walk();
    expect(names(w)).toContain('web.other.svc.cluster.local.');
    expect(afterPush.answers[0]?.target).toBe('web.other.svc.cluster.local.');
    // After the push the client map entry was read again too (the map is pushed like the zone).
    expect(names(w)[0]).toBe('10-244-1-5.client.dns.cluster.local.');
    w.asked.length = 0;
    w.clock.ms += 29_000;
    await walk();
    expect(names(w)).toEqual([]);
    // 30 s: the walk's answer and the client map entry (TXT TTL 30) both expire.
    w.clock.ms += 1_000;
    w.asked.length = 0;
    await walk();
    expect(names(w)).toContain('web.other.svc.cluster.local.');
    expect(names(w)[0]).toBe('10-244-1-5.client.dns.cluster.local.');
    expect(w.stage.counts.kept).toBe(1);
  });

  it('reads an asker’s client map entry once per TTL, for plain walks too, and again after a drop', async () => {
    const w = keeping();
    const mapReads = () => w.asked.filter((q) => q.name === '10-244-1-5.client.dns.cluster.local.').length;
    for (const name of ['a.example', 'b.example', 'c.example'])
      await w.ask(`${name}.testns.svc.cluster.local`, QTYPE.A, w.from('10.244.1.5'));
    expect(mapReads()).toBe(1);
    w.clock.drops++;
    await w.ask('d.example.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(mapReads()).toBe(2);
    w.clock.ms += 30_000;
    await w.ask('e.example.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(mapReads()).toBe(3);
  });

  it('keeps no walk whose steps were out while the cache dropped something', async () => {
    const clock = { ms: 0, drops: 0 };
    const kept = new KeptWalks({ drops: () => clock.drops, now: () => clock.ms, maxEntries: 100 });
    const w = walker([], false, undefined, kept);
    const stage = new AutopathStage(
      { zone: ZONE, extraSearch: [] },
      (_raw, remoteAddress) => ({ address: remoteAddress, carried: false }),
      undefined,
      kept,
    );
    // A push lands while the walk's steps are being answered.
    const behind = (request: ForwarderRequest) => {
      if (request.ownQuestion && request.query.key === 'api.example.com.') clock.drops++;
      return w.behind(request);
    };
    const ask = askThrough(chainStages<ForwarderRequest>([stage], behind));
    await ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(kept.size).toBe(0);
  });

  it('keeps none with a cache of size 0, and at most its bound', async () => {
    const none = new KeptWalks({ drops: () => 0, now: () => 0, maxEntries: 0 });
    const w = walker([], false, undefined, none);
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(none.size).toBe(0);
    const two = new KeptWalks({ drops: () => 0, now: () => 0, maxEntries: 2 });
    const w2 = walker([], false, undefined, two);
    for (const n of ['api.example.com', 'web.other', 'files.corp.example'])
      await w2.ask(`${n}.testns.svc.cluster.local`, QTYPE.A, w2.from('10.244.1.5'));
    expect(two.size).toBe(2);
  });

  it('lets the express lane answer a kept walk, as the chain would, to the asker it was kept for and no one else', async () => {
    const w = keeping();
    const name = 'API.example.com.testns.svc.cluster.local';
    const query = (id: number) => encodeMessage(buildQueryMessage(id, name, QTYPE.A, { edns: { udpSize: 1232 } }));
    const lane = (raw: Buffer, from: string) => {
      const question = new PlainQuestion();
      expect(readPlainQuery(raw, question)).toBe(true);
      return w.stage.keptAtOnce(raw, question, from, 1232);
    };
    // Nothing kept yet: the chain's.
    expect(lane(query(1), '10.244.1.5')).toBeUndefined();
    const chain = await w.ask(name, QTYPE.A, w.from('10.244.1.5'));
    w.clock.ms += 2_000;
    const fast = lane(query(7), '10.244.1.5') as Buffer;
    const decoded = decodeMessage(fast);
    expect(decoded.id).toBe(7);
    expect(decoded.questions[0]?.name).toBe(`${name}.`);
    expect(decoded.answers.map((r) => [r.name, r.type, r.target ?? r.address, r.ttl])).toEqual(
      chain.answers.map((r) => [r.name, r.type, r.target ?? r.address, r.ttl - 2]),
    );
    expect(decoded.additionals.some((r) => r.type === QTYPE.OPT)).toBe(true);
    // Not to a pod of another namespace, nor an unknown one, nor for another type.
    expect(lane(query(8), '10.244.2.5')).toBeUndefined();
    expect(lane(query(9), '10.244.9.9')).toBeUndefined();
    const aaaa = encodeMessage(buildQueryMessage(10, name, QTYPE.AAAA, { edns: { udpSize: 1232 } }));
    expect(lane(aaaa, '10.244.1.5')).toBeUndefined();
    // Nor after the cache dropped anything.
    w.clock.drops++;
    expect(lane(query(11), '10.244.1.5')).toBeUndefined();
  });

  it('leaves a pod a node cache named to the chain, whose answer carries the name back', async () => {
    const clock = { ms: 0, drops: 0 };
    const kept = new KeptWalks({ drops: () => clock.drops, now: () => clock.ms, maxEntries: 100 });
    const w = walker([], true, undefined, kept);
    const opt = encodeOptRecord({
      udpSize: 1232,
      option: { code: CLIENT_ADDRESS_OPTION, data: encodeClientAddress('10.244.1.5') },
    });
    const plain = encodeMessage(
      buildQueryMessage(3, 'api.example.com.testns.svc.cluster.local', QTYPE.A, { edns: { udpSize: 1232 } }),
    );
    const carried = Buffer.concat([plain.subarray(0, plain.length - OPT_RECORD_BYTES), opt]);
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    const question = new PlainQuestion();
    expect(readPlainQuery(carried, question)).toBe(true);
    expect(w.stage.keptAtOnce(carried, question, '127.0.0.1', 1232)).toBeUndefined();
    // The same query without the option, from the pod itself: answered at once.
    expect(readPlainQuery(plain, question)).toBe(true);
    expect(w.stage.keptAtOnce(plain, question, '10.244.1.5', 1232)).toBeDefined();
  });

  it('asks no cluster step below a name known not to exist (RFC 8020): a second outside name goes straight out', async () => {
    const w = keeping();
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    // Learnt beside the first walk's steps: no Service `com` in testns, no namespace `com`.
    expect(names(w)).toEqual(expect.arrayContaining(['com.testns.svc.cluster.local.', 'com.svc.cluster.local.']));
    w.asked.length = 0;
    ZONES['www.example.com.'] = [a('www.example.com.', '192.0.2.11', 300)];
    try {
      const reply = await w.ask('www.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
      expect(reply.answers.map((r) => r.target ?? r.address)).toEqual(['www.example.com.', '192.0.2.11']);
      expect(names(w)).toEqual(['www.example.com.']);
      // Found nowhere: the first step's own NXDOMAIN, asked then.
      w.asked.length = 0;
      const none = await w.ask('nothing.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
      expect(none.flags.rcode).toBe(RCODE.NXDOMAIN);
      expect(names(w)).toEqual(['nothing.example.com.', 'nothing.example.com.testns.svc.cluster.local.']);
      // A push forgets what was known: the cluster is asked again.
      w.clock.drops++;
      w.asked.length = 0;
      await w.ask('www.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
      expect(names(w)).toContain('www.example.com.svc.cluster.local.');
    } finally {
      delete ZONES['www.example.com.'];
    }
  });

  it('still asks a cluster step whose cut exists: `web.other` is looked for in the namespace `other`', async () => {
    const w = keeping();
    await w.ask('db.other.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    w.asked.length = 0;
    const reply = await w.ask('web.other.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(reply.answers.map((r) => r.target ?? r.address)).toEqual(['web.other.svc.cluster.local.', '10.96.0.20']);
    // `other.testns.svc` is known NXDOMAIN, so the first step is not needed up front; `other.svc` exists.
    expect(names(w)).toEqual(['web.other.svc.cluster.local.']);
  });

  it('keeps that an address is nobody’s for the map’s negative TTL: a node cache’s steps, shaped like first steps, look it up once', async () => {
    const w = keeping();
    const mapReads = () => w.asked.filter((q) => q.name === '10-244-9-9.client.dns.cluster.local.').length;
    for (const name of ['web.other', 'web.shop', 'web.other'])
      expect((await w.ask(`${name}.svc.cluster.local`, QTYPE.A, w.from('10.244.9.9'))).flags.rcode).toBeDefined();
    expect(mapReads()).toBe(1);
    expect(w.stage.counts.skipped).toBe(3);
    // The SOA's TTL (5 s) later, asked again.
    w.clock.ms += 5_000;
    await w.ask('web.other.svc.cluster.local', QTYPE.A, w.from('10.244.9.9'));
    expect(mapReads()).toBe(2);
  });

  it('uses no cut where the record-builder does not answer (a stub domain inside the zone): every step asked', async () => {
    const clock = { ms: 0, drops: 0 };
    const kept = new KeptWalks({ drops: () => clock.drops, now: () => clock.ms, maxEntries: 100 });
    const w = walker([], false, () => false, kept);
    await w.ask('api.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).not.toContain('com.svc.cluster.local.');
    w.asked.length = 0;
    await w.ask('www.example.com.testns.svc.cluster.local', QTYPE.A, w.from('10.244.1.5'));
    expect(w.asked.map((q) => q.name)).toContain('www.example.com.svc.cluster.local.');
  });
});
