import { QTYPE, ROOT } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { askCase } from '../../testing/coredns-cases.js';
import { WhoamiStage } from './whoami-stage.js';

describe('whoami', () => {
  it('answers with the asker’s address and port in additional, as CoreDNS’s whoami', async () => {
    const stage = new WhoamiStage(() => [{ zones: [ROOT], value: true }]);
    const asked = await askCase(
      { name: 'whoami', corefile: '', query: { name: 'example.org.', type: 'A', remote: '10.240.0.1' }, expect: {} },
      (next) => (request) => stage.serve(request, next),
    );
    expect(asked.passedOn).toBe(false);
    expect(asked.reply?.flags.aa).toBe(true);
    expect(asked.reply?.additionals.filter((r) => r.type !== QTYPE.OPT)).toEqual([
      { name: 'example.org.', type: QTYPE.A, class: 1, ttl: 0, address: '10.240.0.1' },
      {
        name: '_udp.example.org.',
        type: QTYPE.SRV,
        class: 1,
        ttl: 0,
        priority: 0,
        weight: 0,
        port: 40212,
        target: '.',
      },
    ]);
  });
});
