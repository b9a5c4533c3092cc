import type { Buffer } from 'node:buffer';
import { createSilentLogger } from '@cluster-dns/runtime';
import { buildBareResponse, RCODE, toFqdn } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { ForwarderRequest } from '../../config/forwarder-request.js';
import { requestFor, resolvedAnswer } from '../../testing/test-chain.js';
import { routesOf } from '../../testing/test-upstreams.js';
import { registrableDomainOf, ZoneCuts } from './parent-domain.js';
import { SubdomainGuardStage } from './subdomain-guard-stage.js';

const OPTIONS = { minMisses: 10, windowMs: 10_000, holdMs: 30_000 };

/** The guard before a fake upstream: names under `dead` fail (no answer), the rest answer NXDOMAIN. */
function guardUnderTest(dead: (name: string) => boolean) {
  const clock = { ms: 0 };
  const logs: string[] = [];
  const routes = routesOf('/cluster.local/127.0.0.1#10053', '192.0.2.53');
  const guard = new SubdomainGuardStage(OPTIONS, {
    routes: () => routes,
    log: { ...createSilentLogger(), warn: (msg) => logs.push(msg), info: (msg) => logs.push(msg) },
    now: () => clock.ms,
  });
  const asked: string[] = [];
  const next = async (request: ForwarderRequest) => {
    asked.push(request.query.key);
    if (dead(request.query.key)) return buildBareResponse(request.query, RCODE.SERVFAIL);
    request.resolved = resolvedAnswer(request.query.key, 1, {
      rcode: RCODE.NXDOMAIN,
      route: routes.routeFor(request.query.key),
    });
    return buildBareResponse(request.query, RCODE.NXDOMAIN);
  };
  const ask = async (name: string) => {
    const reply = (await guard.serve(requestFor(name), next)) as Buffer;
    return reply.readUInt16BE(2) & 0xf;
  };
  return { guard, ask, asked, clock, logs };
}

describe('the random-subdomain guard', () => {
  it('trips for a parent whose distinct names fail, then answers its new names SERVFAIL without asking; others pass', async () => {
    const g = guardUnderTest((name) => name.endsWith('victim.example.'));
    for (let i = 0; i < 25; i++) expect(await g.ask(`r${i}.victim.example`)).toBe(RCODE.SERVFAIL);
    expect(g.guard.counts.trips).toBe(1);
    // Tripped at the 20th failure (MIN_FAILURES): the last five were not asked.
    expect(g.asked).toHaveLength(20);
    expect(g.logs).toEqual(['random-subdomain guard tripped: new names under this domain get SERVFAIL without asking']);
    const askedBefore = g.asked.length;
    for (let i = 100; i < 200; i++) expect(await g.ask(`r${i}.deep.victim.example`)).toBe(RCODE.SERVFAIL);
    expect(g.asked.length).toBe(askedBefore);
    expect(g.guard.counts.answered).toBe(105);
    // Another domain, and the cluster zone, are asked as ever.
    expect(await g.ask('www.example.org')).toBe(RCODE.NXDOMAIN);
    expect(await g.ask('nope.shop.svc.cluster.local')).toBe(RCODE.NXDOMAIN);
    expect(g.asked.slice(askedBefore)).toEqual(['www.example.org.', 'nope.shop.svc.cluster.local.']);
    expect(g.guard.heldParents()).toBe(1);
    // Once the hold runs out, names are asked again, and the clearing is logged.
    g.clock.ms = 30_000;
    expect(g.guard.heldParents()).toBe(0);
    expect(g.logs.at(-1)).toBe('random-subdomain guard cleared: names under this domain are asked again');
    await g.ask('again.victim.example');
    expect(g.asked.at(-1)).toBe('again.victim.example.');
  });

  it('never trips on one name failing again and again, nor on a flood of names that get answers', async () => {
    const g = guardUnderTest((name) => name === 'down.example.org.');
    for (let i = 0; i < 200; i++) await g.ask('down.example.org');
    for (let i = 0; i < 200; i++) await g.ask(`r${i}.example.org`);
    expect(g.guard.counts.trips).toBe(0);
  });

  it('never guards the cluster zone (--server routes): an outage there must not outlast itself', async () => {
    const g = guardUnderTest(() => true);
    for (let i = 0; i < 100; i++) await g.ask(`r${i}.shop.svc.cluster.local`);
    expect(g.guard.counts.trips).toBe(0);
    expect(g.asked).toHaveLength(100);
  });

  it('is off with minMisses 0', async () => {
    const g = guardUnderTest(() => true);
    const off = new SubdomainGuardStage(
      { ...OPTIONS, minMisses: 0 },
      { routes: () => routesOf('192.0.2.53'), log: createSilentLogger(), now: () => 0 },
    );
    let asked = 0;
    for (let i = 0; i < 100; i++)
      await off.serve(requestFor(`r${i}.victim.example`), async (r) => {
        asked++;
        return buildBareResponse(r.query, RCODE.SERVFAIL);
      });
    expect([asked, off.counts.trips, g.guard.counts.trips]).toEqual([100, 0, 0]);
  });
});

describe('the domain a name’s misses count under', () => {
  it.each([
    ['a.b.victim.example.org', 'example.org.'],
    ['x.victim.co.uk', 'victim.co.uk.'],
    ['x.y.example.com.au', 'example.com.au.'],
    ['example.org', 'example.org.'],
    ['org', 'org.'],
    ['x.cloud.example', 'cloud.example.'],
  ])('%s counts under %s', (name, parent) => {
    expect(registrableDomainOf(toFqdn(name))).toBe(parent);
  });

  it('takes a learnt zone cut below the registrable domain, never one above it, and the stub domain for its names', () => {
    const cuts = new ZoneCuts();
    const learn = (apex: string) => cuts.learn(...soaOwnedBy(apex));
    learn('org');
    learn('s3.example.org');
    expect(cuts.parentOf(toFqdn('r1.s3.example.org'), toFqdn('.'))).toBe('s3.example.org.');
    expect(cuts.parentOf(toFqdn('r1.example.org'), toFqdn('.'))).toBe('example.org.');
    expect(cuts.parentOf(toFqdn('r1.x.acme.local'), toFqdn('acme.local'))).toBe('acme.local.');
  });
});

/** A negative reply whose authority holds the SOA of `apex`, as wire and scan. */
function soaOwnedBy(apex: string) {
  const resolved = resolvedAnswer(`nope.${apex}.`, 1, { rcode: RCODE.NXDOMAIN, soaMinimum: 30, soaOwner: `${apex}.` });
  return [resolved.wire, resolved.scanned] as const;
}
