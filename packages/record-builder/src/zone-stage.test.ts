import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { through, stageView as view } from './test-stages.js';
import { ZoneStage } from './zone-stage.js';

describe('the record-builder’s zone stage', () => {
  it('refuses names outside its zones, notes the zone of the rest, and passes them on', () => {
    const t = through([new ZoneStage(view, () => true)]);
    expect(t.ask('www.example.org')).toBe(RCODE.REFUSED);
    expect(t.ask('web.shop.svc.cluster.local')).toBe('passed');
    expect(t.ask('9.2.0.192.in-addr.arpa', QTYPE.PTR)).toBe('passed');
    expect(t.reached.map((r) => r.zone)).toEqual([view.zone, view.reverseZones[0]]);
  });

  it('answers SERVFAIL until ready (never NXDOMAIN for a name that may exist), and NXDOMAIN for an escaped octet', () => {
    let ready = false;
    const t = through([new ZoneStage(view, () => ready)]);
    expect(t.ask('web.shop.svc.cluster.local')).toBe(RCODE.SERVFAIL);
    ready = true;
    expect(t.ask('we\\032b.shop.svc.cluster.local')).toBe(RCODE.NXDOMAIN);
    expect(t.reached).toHaveLength(0);
  });
});
