import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { QTYPE } from './constants.js';
import { toFqdn } from './fqdn.js';
import { decodeMessage } from './message.js';
import { MessageWriter } from './message-writer.js';
import { ednsOption, optRecordWith } from './opt-record.js';
import {
  decodeProgrammingTimes,
  encodeProgrammingTimes,
  MAX_PROGRAMMED_PER_TRANSFER,
  PROGRAMMING_TIMES_OPTION,
} from './programming-times.js';
import { parseQuery } from './query.js';
import { buildIxfrQuery, ixfrQuerySerial } from './zone-change.js';

const Z = toFqdn('cluster.local');

describe('programming times on our zone transfers', () => {
  it('round-trips each change’s kind and trigger time to the millisecond', () => {
    const changes = [
      { kind: 'cluster_ip', triggerMs: 1_764_750_000_123 },
      { kind: 'headless_with_selector', triggerMs: 1_764_750_000_456 },
    ] as const;
    expect(decodeProgrammingTimes(encodeProgrammingTimes(changes))).toEqual(changes);
  });

  it('skips an entry of a kind it does not know and a partial one, and carries at most the cap', () => {
    const data = encodeProgrammingTimes([
      { kind: 'cluster_ip', triggerMs: 5 },
      { kind: 'cluster_ip', triggerMs: 6 },
    ]);
    data[7] = 9; // the second entry's kind: unknown to this reader
    expect(decodeProgrammingTimes(Buffer.concat([data, Buffer.from([1, 0, 0])]))).toEqual([
      { kind: 'cluster_ip', triggerMs: 5 },
    ]);
    const many = Array.from({ length: MAX_PROGRAMMED_PER_TRANSFER + 5 }, (_, i) => ({
      kind: 'cluster_ip' as const,
      triggerMs: i,
    }));
    const kept = decodeProgrammingTimes(encodeProgrammingTimes(many));
    expect(kept).toHaveLength(MAX_PROGRAMMED_PER_TRANSFER);
    expect(kept[0]?.triggerMs).toBe(0);
  });

  it('asks with an empty option in an OPT that a server parses as EDNS, the SOA serial kept', () => {
    const plain = buildIxfrQuery(7, Z, 42);
    const asking = buildIxfrQuery(7, Z, 42, { programmingTimes: true });
    expect(parseQuery(plain).edns).toBeUndefined();
    expect(parseQuery(asking).edns?.version).toBe(0);
    expect(ednsOption(plain, PROGRAMMING_TIMES_OPTION)).toBeUndefined();
    expect(ednsOption(asking, PROGRAMMING_TIMES_OPTION)).toEqual(Buffer.alloc(0));
    expect(ixfrQuerySerial(asking)).toBe(42);
    expect(decodeMessage(asking).questions).toEqual([{ name: 'cluster.local.', type: QTYPE.IXFR, class: 1 }]);
  });

  it('finds an option among others in an OPT after answer records, and nothing in an OPT without it', () => {
    const opt = optRecordWith(65000, Buffer.from('x'));
    // Two options in one OPT: another's first, ours second.
    const ours = encodeProgrammingTimes([{ kind: 'cluster_ip', triggerMs: 77 }]);
    const rdata = Buffer.concat([opt.rdata, optRecordWith(PROGRAMMING_TIMES_OPTION, ours).rdata]);
    const message = new MessageWriter()
      .question(Z, QTYPE.IXFR, 1)
      .record(1, { name: Z, type: QTYPE.A, class: 1, ttl: 5, address: '10.0.0.1' })
      .record(3, { ...opt, rdata })
      .finish(1, 0x8400);
    expect(ednsOption(message, PROGRAMMING_TIMES_OPTION)).toEqual(ours);
    const without = new MessageWriter().question(Z, QTYPE.IXFR, 1).record(3, opt).finish(1, 0x8400);
    expect(ednsOption(without, PROGRAMMING_TIMES_OPTION)).toBeUndefined();
    // An option whose length runs past its record: not read, nothing thrown.
    const bad = Buffer.from(without);
    bad.writeUInt16BE(200, bad.length - 3);
    expect(ednsOption(bad, 65000)).toBeUndefined();
  });
});
