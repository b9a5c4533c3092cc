import { QTYPE, RCODE } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { through, stageView as view } from './test-stages.js';
import { TransferStage } from './transfer-stage.js';
import { ZoneStage } from './zone-stage.js';

describe('the record-builder’s transfer stage', () => {
  const stages = [new ZoneStage(view, () => true), new TransferStage(view, (a) => a === '127.0.0.1')];

  it('refuses a transfer to an address not allowed, and AXFR over UDP', () => {
    expect(through(stages, '192.0.2.9').ask('cluster.local', QTYPE.AXFR, 'tcp')).toBe(RCODE.REFUSED);
    expect(through(stages).ask('cluster.local', QTYPE.AXFR, 'udp')).toBe(RCODE.REFUSED);
  });

  it('streams an AXFR over TCP to an allowed address, and passes other questions on', () => {
    const t = through(stages);
    expect(t.ask('cluster.local', QTYPE.AXFR, 'tcp')).toBe('lazy');
    expect(t.ask('cluster.local', QTYPE.SOA)).toBe('passed');
  });
});
