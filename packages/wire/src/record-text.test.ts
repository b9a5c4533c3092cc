import { describe, expect, it } from 'vitest';
import { decodeMessage } from './message.js';
import { MessageWriter } from './message-writer.js';
import { parseRecordText, RecordTextError, recordText, sameRecord } from './record-text.js';
import { parseZoneFile } from './zone-file.js';

/** A record through the wire and back: what a client would read of it. */
const throughWire = (text: string) => {
  const rr = parseRecordText(text);
  const wire = new MessageWriter().question('x.', 1, 1).record(1, rr).finish(1, 0x8000);
  return decodeMessage(wire).answers[0];
};

describe('records in presentation form', () => {
  it.each([
    ['example.org. 60 IN A 192.0.2.1', 'example.org.\t60\tIN\tA\t192.0.2.1'],
    ['example.org IN 60 AAAA 2001:db8::1', 'example.org.\t60\tIN\tAAAA\t2001:db8::1'],
    ['a.example.org. CNAME b.example.org.', 'a.example.org.\t3600\tIN\tCNAME\tb.example.org.'],
    ['example.org. 5 IN MX 10 mail.example.org.', 'example.org.\t5\tIN\tMX\t10 mail.example.org.'],
    [
      '_x._tcp.example.org. 5 IN SRV 0 100 80 web.example.org.',
      '_x._tcp.example.org.\t5\tIN\tSRV\t0 100 80 web.example.org.',
    ],
    ['example.org. 5 IN TXT "a b" c "q\\"t"', 'example.org.\t5\tIN\tTXT\t"a b" "c" "q\\"t"'],
    [
      'example.org. 5 IN SOA ns.example.org. h.example.org. 7 1h 30m 1d 60',
      'example.org.\t5\tIN\tSOA\tns.example.org. h.example.org. 7 3600 1800 86400 60',
    ],
    ['example.org. 8482 IN HINFO "RFC8482" ""', 'example.org.\t8482\tIN\tHINFO\t\\# 9 075246433834383200'],
  ])('reads %s as dns.NewRR would, and it survives the wire', (text, shown) => {
    const rr = parseRecordText(text);
    expect(recordText(rr)).toBe(shown);
    const back = throughWire(text);
    expect(back && sameRecord(back, rr)).toBe(true);
  });

  it.each([
    ['example.org. A 300.1.1.1', /IPv4/],
    ['example.org. 60 IN', /no record type/],
    ['example.org. 60 IN MX x mail.example.org.', /MX preference/],
    ['example.org. 60 IN NSEC3 1 1 1 - x', /RFC 3597/],
  ])('refuses %s, saying why', (text, why) => {
    expect(() => parseRecordText(text)).toThrow(RecordTextError);
    expect(() => parseRecordText(text)).toThrow(why);
  });
});

describe('zone files', () => {
  it('reads $ORIGIN, $TTL, @, blank owners, parentheses and comments', () => {
    const records = parseZoneFile(
      [
        '$TTL 300',
        '@ IN SOA ns1 hostmaster (',
        '    2024010101 ; serial',
        '    7200 3600 1209600 60 )',
        '  IN NS ns1',
        'ns1 IN A 192.0.2.53',
        '$ORIGIN sub.example.org.',
        'www 60 IN CNAME @',
      ].join('\n'),
      { origin: 'example.org' },
    ).map(recordText);
    expect(records).toEqual([
      'example.org.\t300\tIN\tSOA\tns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 60',
      'example.org.\t300\tIN\tNS\tns1.example.org.',
      'ns1.example.org.\t300\tIN\tA\t192.0.2.53',
      'www.sub.example.org.\t60\tIN\tCNAME\tsub.example.org.',
    ]);
  });

  it('names the line that does not read', () => {
    expect(() => parseZoneFile('@ SOA a b 1 2 3 4 5\nwww A nope\n', { origin: 'example.org.' })).toThrow(
      /line 2: .*IPv4/,
    );
  });
});
