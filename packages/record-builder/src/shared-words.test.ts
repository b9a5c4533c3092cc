import { describe, expect, it } from 'vitest';
import type { ServiceInfo } from './cluster-model.js';
import { packEndpointGroup } from './endpoint-group.js';
import { SharedWords } from './shared-words.js';

const service = (namespace: string, name: string): ServiceInfo => ({
  namespace,
  name,
  kind: 'cluster-ip',
  clusterIPs: ['10.96.0.10'],
  externalName: undefined,
  ports: [
    { name: 'http', port: 80, protocol: 'tcp' },
    { name: 'dns', port: 53, protocol: 'udp' },
  ],
  publishNotReady: false,
});

describe('shared words: one copy of what the store repeats', () => {
  it('gives back equal Services and groups, holding each repeated word once', () => {
    const words = new SharedWords();
    for (let i = 0; i < 100; i++) {
      const info = service(`ns-${i % 3}`, `svc-${i}`);
      expect(words.service(info)).toEqual(info);
    }
    // ns-0..2, cluster-ip, http, tcp, dns, udp: the names and addresses are not shared.
    expect(words.size).toBe(8);
    const group = packEndpointGroup(
      {
        namespace: 'ns-1',
        name: 'svc-1-abc',
        serviceName: 'svc-1',
        ports: [{ name: 'grpc', port: 9, protocol: 'tcp' }],
      },
      [{ addresses: ['10.0.0.1'], ready: true, terminating: false, hostname: 'a' }],
    );
    expect(words.group(group)).toEqual(group);
    expect(words.size).toBe(9);
  });

  it('starts its table again rather than growing without bound', () => {
    const words = new SharedWords();
    for (let i = 0; i < 120_000; i++) expect(words.word(`w-${i}`)).toBe(`w-${i}`);
    expect(words.size).toBeLessThanOrEqual(50_000);
  });
});
