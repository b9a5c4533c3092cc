import { checkExpectation, craftedPackets, mutate, optRecord, query, seededRandom } from '@cluster-dns/testkit';
import { decodeMessage, QTYPE } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rssMiB, SCALE, type Stack, startStack, tcpClient, udpClient } from '../support/stack.js';

// Every DNS listener of the stack against the malformed-message corpus (testkit/malformed.ts)
// and seeded mutations of valid queries, over UDP and TCP. Each must answer or drop every
// message as the RFCs say, keep answering good queries correctly in between, stay up, and stay
// within memory. `pnpm fuzz` runs it with CLUSTER_DNS_FUZZ_SCALE=50.
const GOOD = ['kubernetes', 'default', 'svc', 'cluster', 'local'];
const SEED = Number(process.env.CLUSTER_DNS_FUZZ_SEED ?? 20261201);
const MUTATIONS = 3000 * SCALE;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

/** A valid query with its own ID: it must get 10.96.0.1 back. */
let markerId = 1;
const marker = () => {
  const m = query(GOOD);
  m.writeUInt16BE(0x8000 | (markerId++ & 0x7fff), 0);
  return m;
};
const isGoodAnswer = (reply: Buffer) => decodeMessage(reply).answers.some((a) => a.address === '10.96.0.1');
/** A copy with an ID of its own (0x1000 up), so late replies to earlier messages never match. */
let nextId = 0x1000;
const withId = (bytes: Buffer) => {
  const copy = Buffer.from(bytes);
  if (copy.length >= 2) copy.writeUInt16BE(nextId++ & 0x7fff, 0);
  return copy;
};

/** Valid queries of every kind the servers see, for mutation. */
const seeds = () => [
  query(GOOD),
  query(GOOD, QTYPE.AAAA),
  query(['_https', '_tcp', ...GOOD], QTYPE.SRV),
  query(['pg', 'data', 'svc', 'cluster', 'local'], QTYPE.SRV, { opt: optRecord({ udp: 4096 }) }),
  query(['1', '0', '96', '10', 'in-addr', 'arpa'], QTYPE.PTR),
  query(['web', 'shop', 'svc', 'cluster', 'local'], QTYPE.ANY, { opt: optRecord() }),
  query(['pay', 'shop', 'svc', 'cluster', 'local']),
  query(['hits', 'bind'], QTYPE.TXT),
  query(['www', 'example', 'org']),
];

describe.each([
  ['record-builder', () => stack.rbPort, () => stack.rb],
  ['forwarder', () => stack.fwPort, () => stack.fw],
])('%s listener under malformed and mutated messages', (_name, port, proc) => {
  it('answers or drops every message of the corpus as the RFCs say, over UDP', async () => {
    const client = await udpClient(port());
    const failures: string[] = [];
    try {
      for (const packet of craftedPackets(GOOD)) {
        const bytes = withId(packet.bytes);
        if (packet.expect.kind === 'drop') {
          // Dropping is decided before anything asynchronous: once a later query is answered,
          // a reply to this one would have been sent.
          const m = marker();
          client.send(bytes);
          const answer = await client.ask(m, m.readUInt16BE(0));
          if (!answer) failures.push(`${packet.name}: the query after it went unanswered`);
          if (bytes.length >= 2 && client.hasReply(bytes.readUInt16BE(0))) failures.push(`${packet.name}: answered`);
          continue;
        }
        const reply = await client.ask(bytes, bytes.readUInt16BE(0));
        const reason = checkExpectation(bytes, reply, packet.expect);
        if (reason) failures.push(`${packet.name}: ${reason}`);
      }
    } finally {
      await client.close();
    }
    expect(failures).toEqual([]);
  });

  it('answers or drops every message of the corpus over TCP, one connection each', async () => {
    const failures: string[] = [];
    for (const packet of craftedPackets(GOOD).filter((p) => !p.udpOnly)) {
      const tcp = await tcpClient(port());
      const bytes = withId(packet.bytes);
      tcp.send(bytes);
      tcp.send(marker());
      await tcp.waitFor(packet.expect.kind === 'drop' ? 1 : 2);
      const replies = tcp.replies;
      const first = replies.find((r) => bytes.length >= 2 && r.readUInt16BE(0) === bytes.readUInt16BE(0));
      if (packet.expect.kind === 'drop' && replies.length !== 1)
        failures.push(`${packet.name}: ${replies.length} replies`);
      const reason = checkExpectation(bytes, first, packet.expect);
      // Over TCP a reply may be bigger than 512: only the rcode and OPT rules carry over.
      if (reason && !reason.includes('more than 512')) failures.push(`${packet.name}: ${reason}`);
      if (!replies.some(isGoodAnswer)) failures.push(`${packet.name}: the query after it went unanswered`);
      tcp.destroy();
    }
    expect(failures).toEqual([]);
  });

  it(
    `survives ${MUTATIONS} seeded mutations over UDP, answering good queries between them`,
    async () => {
      const random = seededRandom(SEED);
      const corpus = seeds();
      const client = await udpClient(port());
      // The good queries come from another pod: the mutations are a flood from one address, past
      // its fair rate, and that client's own queries may be refused with it.
      const pod = await udpClient(port(), '127.0.0.2');
      const rssBefore = rssMiB(proc().child.pid as number);
      let answeredGood = 0;
      try {
        for (let i = 0; i < MUTATIONS; i++) {
          client.send(mutate(corpus[i % corpus.length] as Buffer, random));
          if (i % 100 === 99) {
            // Every hundred, a good query must come back right (the mutated ones may or may not).
            const m = marker();
            const reply = await pod.ask(m, m.readUInt16BE(0), 5000);
            if (reply && isGoodAnswer(reply)) answeredGood++;
          }
        }
      } finally {
        await client.close();
        await pod.close();
      }
      expect(answeredGood).toBe(Math.floor(MUTATIONS / 100));
      expect(proc().child.exitCode).toBeNull();
      // Generous: what matters is that it does not grow with the number of messages.
      expect(rssMiB(proc().child.pid as number)).toBeLessThan(Math.max(400, rssBefore * 2));
    },
    120_000 * SCALE,
  );

  it(
    `survives ${Math.floor(MUTATIONS / 10)} mutated streams over TCP`,
    async () => {
      const random = seededRandom(SEED + 1);
      const corpus = seeds();
      for (let i = 0; i < MUTATIONS / 10; i++) {
        const tcp = await tcpClient(port());
        const message = mutate(corpus[i % corpus.length] as Buffer, random);
        // Half the time a whole frame, half the time raw octets (a broken length prefix).
        tcp.write(random() < 0.5 ? tcp.frame(message) : message);
        tcp.end();
        await tcp.closedWithin(12_000);
        tcp.destroy();
      }
      const check = await tcpClient(port());
      check.send(marker());
      expect(await check.waitFor(1)).toBe(true);
      expect(isGoodAnswer(check.replies[0] as Buffer)).toBe(true);
      check.destroy();
      expect(proc().child.exitCode).toBeNull();
    },
    120_000 * SCALE,
  );
});
