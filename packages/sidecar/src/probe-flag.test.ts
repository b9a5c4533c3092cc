import { describe, expect, it } from 'vitest';
import { parseProbeFlag } from './probe-flag.js';

describe('--probe', () => {
  it.each([
    [
      'kubedns,127.0.0.1:10053,kubernetes.default.svc.cluster.local,5,SRV',
      {
        label: 'kubedns',
        server: { host: '127.0.0.1', port: 10053 },
        name: 'kubernetes.default.svc.cluster.local.',
        intervalMs: 5000,
        type: 'SRV',
      },
    ],
    [
      'dnsmasq,127.0.0.1,kubernetes.default.svc.cluster.local.',
      { server: { host: '127.0.0.1', port: 53 }, intervalMs: 5000, type: 'ANY' },
    ],
    ['v6,[::1]:5353,a.example.org,10,aaaa', { server: { host: '::1', port: 5353 }, intervalMs: 10_000, type: 'AAAA' }],
    ['x_1,10.0.0.1:53,a.example.org,,A', { intervalMs: 5000, type: 'A' }],
  ])('parses %s', (raw, expected) => {
    expect(parseProbeFlag(raw)).toMatchObject(expected);
  });

  it.each([
    ['kubedns,127.0.0.1', '2 comma-separated fields'],
    ['bad-label,127.0.0.1,a.example.org', 'must match ^[A-Za-z0-9_]+$'],
    ['l,ns.example.org,a.example.org', 'server'],
    ['l,127.0.0.1:99999,a.example.org', 'server'],
    ['l,127.0.0.1,a.example.org,soon', 'interval'],
    ['l,127.0.0.1,a.example.org,5,MX', 'type "MX"'],
    ['l,127.0.0.1,a.example.org,5,A,extra', '6 comma-separated fields'],
  ])('rejects %s with the expected form', (raw, why) => {
    expect(() => parseProbeFlag(raw)).toThrow(why);
    expect(() => parseProbeFlag(raw)).toThrow(
      '<label>,<server>,<dns name>[,<interval seconds>][,<type: A|AAAA|SRV|ANY>]',
    );
  });
});
