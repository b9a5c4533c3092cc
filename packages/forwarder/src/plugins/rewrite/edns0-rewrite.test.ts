import { Buffer } from 'node:buffer';
import type { Edns0Rule } from '@cluster-dns/runtime';
import { CLIENT_ADDRESS_OPTION, type EdnsOption } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { applyEdns0, passedOptions, type RewriteAsker } from './edns0-rewrite.js';

const asker = (options: EdnsOption[] | undefined, remoteAddress = '10.1.2.3'): RewriteAsker => ({
  remoteAddress,
  remotePort: 5353,
  transport: 'udp',
  options: () => options,
});
const hex = (options: readonly EdnsOption[]) => options.map((o) => `${o.code}:${o.data.toString('hex')}`);

describe('edns0 rules on the options a question goes upstream with', () => {
  it('starts from the client’s options but those between it and us (cookie, keepalive, padding, ours)', () => {
    const client = [
      { code: 10, data: Buffer.from('0102030405060708', 'hex') },
      { code: 0xffee, data: Buffer.from('aa', 'hex') },
      { code: 12, data: Buffer.alloc(4) },
      { code: CLIENT_ADDRESS_OPTION, data: Buffer.from('0001200a010203', 'hex') },
    ];
    expect(hex(passedOptions(asker(client)))).toEqual(['65518:aa']);
    expect(passedOptions(asker(undefined))).toEqual([]);
  });

  it('sets a client subnet from the client’s address, IPv4-mapped ones as IPv4', () => {
    const rule: Edns0Rule = {
      field: 'edns0',
      option: 'subnet',
      action: 'set',
      v4Bits: 20,
      v6Bits: 48,
      revert: false,
      stop: true,
      line: 1,
    };
    const v4: EdnsOption[] = [];
    expect(applyEdns0(rule, v4, { qname: 'a.', qtype: 1 }, asker([], '::ffff:10.1.255.3'))).toBe(true);
    // Family 1, /20, scope 0, then 10.1.240 (the last octet keeps its top four bits).
    expect(hex(v4)).toEqual(['8:000114000a01f0']);
    const v6: EdnsOption[] = [];
    applyEdns0(rule, v6, { qname: 'a.', qtype: 1 }, asker([], '2001:db8:abcd:12::1'));
    expect(hex(v6)).toEqual(['8:0002300020010db8abcd']);
  });

  it('puts the variables’ values on the wire as CoreDNS does', () => {
    const local = (variable: 'qname' | 'qtype' | 'client_ip' | 'client_port' | 'protocol'): EdnsOption[] => {
      const out: EdnsOption[] = [];
      applyEdns0(
        {
          field: 'edns0',
          option: 'local',
          code: 0xffee,
          data: { variable },
          action: 'set',
          revert: false,
          stop: true,
          line: 1,
        },
        out,
        { qname: 'Www.example.org.', qtype: 28 },
        asker([]),
      );
      return out;
    };
    expect(local('qname')[0]?.data.toString()).toBe('Www.example.org.');
    expect(hex(local('qtype'))).toEqual(['65518:001c']);
    expect(hex(local('client_ip'))).toEqual(['65518:0a010203']);
    expect(hex(local('client_port'))).toEqual(['65518:14e9']);
    expect(local('protocol')[0]?.data.toString()).toBe('udp');
  });
});
