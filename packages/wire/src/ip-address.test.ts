import { describe, expect, it } from 'vitest';
import { readApiAddress } from './ip-address.js';

// What an address in a Kubernetes object means, as kube-proxy and CoreDNS (Go) read it: these
// are the cases of k8s.io/utils/net's ParseIPSloppy and Go's To4, which objects stored before
// KEP-4858's validation can still hold. Reading `012` as octal would send clients to another host.
describe('readApiAddress', () => {
  it.each([
    ['10.0.0.1', '10.0.0.1'],
    ['010.000.000.001', '10.0.0.1'],
    ['1.2.3.012', '1.2.3.12'],
    ['0000000010.0.0.1', '10.0.0.1'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['::FFFF:0a00:0001', '10.0.0.1'],
    ['0:0:0:0:0:ffff:a00:1', '10.0.0.1'],
    ['::ffff:010.000.000.001', '10.0.0.1'],
    ['FD00:0:0::0001', 'fd00::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['::1', '::1'],
    // Neither is IPv4-mapped: a NAT64 prefix and the deprecated IPv4-compatible form stay IPv6.
    ['64:ff9b::10.0.0.1', '64:ff9b::a00:1'],
    ['::10.0.0.1', '::a00:1'],
  ])('reads %s as %s', (text, address) => {
    expect(readApiAddress(text)).toBe(address);
  });

  it.each([
    '',
    'None',
    '256.0.0.1',
    '1.2.3',
    '1.2.3.4.5',
    '0x0a.0.0.1',
    '1.2.3.-4',
    '10.0.0.1 ',
    'fe80::1%eth0',
    '::ffff:256.0.0.1',
    '1::2::3',
    'example.com',
  ])('is no address: %j', (text) => {
    expect(readApiAddress(text)).toBeUndefined();
  });
});
