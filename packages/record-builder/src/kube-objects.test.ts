import { fixtures } from '@cluster-dns/testkit';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { pickJson } from './json-pick.js';
import { ENDPOINT_SLICE_FIELDS, toEndpointGroup } from './kube-objects.js';

describe('the EndpointSlice fields the API worker keeps', () => {
  it('are every field toEndpointGroup reads: the picked slice converts as the whole one does', () => {
    const slices = [
      fixtures.controllerEndpointSlice(
        'prod',
        'web',
        'web-x7k2p',
        [
          { addresses: ['10.244.1.5'], hostname: 'web-0' },
          { addresses: ['10.244.1.6'], ready: false },
          { addresses: ['10.244.1.7'], ready: true, terminating: true },
          { addresses: ['10.244.1.8', '10.244.1.9'], ready: false, serving: true, terminating: true },
        ],
        {
          ports: [
            { name: 'http', port: 8080 },
            { name: 'dns', port: 53, protocol: 'UDP' },
          ],
          triggerTime: new Date('2026-12-02T07:00:00Z'),
          zones: 3,
        },
      ),
      fixtures.controllerEndpointSlice('prod', 'v6', 'v6-abcde', [{ addresses: ['fd00:0:0::1:5'] }]),
      fixtures.endpointSlice('data', 'pg', 'pg-1', [{ addresses: ['10.244.2.31'], hostname: 'pg-0', ready: false }], {
        ports: [{ name: 'pg', port: 5432 }],
      }),
    ] as unknown as V1EndpointSlice[];
    for (const slice of slices) {
      const picked = pickJson(JSON.stringify(slice), ENDPOINT_SLICE_FIELDS) as V1EndpointSlice;
      expect(toEndpointGroup(picked)).toEqual(toEndpointGroup(slice));
      expect(toEndpointGroup(slice)).toBeDefined();
      // What it leaves out is most of the object.
      expect(JSON.stringify(picked).length).toBeLessThan(JSON.stringify(slice).length);
      expect(picked.metadata?.resourceVersion).toBe(slice.metadata?.resourceVersion);
    }
  });
});
