import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { createLogger, createSilentLogger, parseFlags } from '@cluster-dns/runtime';
import {
  hasCommand,
  runChecked,
  startTestUpstream,
  type TestUpstream,
  type TestUpstreamOptions,
} from '@cluster-dns/testkit';
import { ednsOptions, QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { forwarderFlags } from '../src/options.js';
import { corefileForwarder } from '../src/server/corefile-setup.js';
import { launchForwarder } from '../src/workers/launcher.js';

// A Corefile's forward as the field writes it: DNS over TLS to a server whose certificate names
// it (OpenShift's `forward . tls://… { tls_servername …; tls CA }`), and except.

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function upstream(records: TestUpstreamOptions['records']): Promise<TestUpstream> {
  const u = await startTestUpstream(records ? { records } : {});
  cleanups.push(() => u.close());
  return u;
}

/** A DNS-over-TLS server in front of `behind` (its TCP port): TLS ended here, the bytes passed on. */
async function tlsFront(behind: TestUpstream, cert: { key: Buffer; cert: Buffer }) {
  const accepted: tls.TLSSocket[] = [];
  const server = tls.createServer({ key: cert.key, cert: cert.cert }, (socket) => {
    accepted.push(socket);
    const back = net.connect({ host: behind.host, port: behind.port });
    socket.pipe(back).pipe(socket);
    const end = () => {
      socket.destroy();
      back.destroy();
    };
    socket.on('error', end);
    back.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of accepted) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, accepted };
}

/** Starts the forwarder on this Corefile (in a folder of its own), and asks it. */
async function corefileMode(text: string, dir: string, log = createSilentLogger()) {
  const path = join(dir, 'Corefile');
  writeFileSync(path, text);
  const values = parseFlags(forwarderFlags, [`--corefile=${path}`, '--lameduck=0s', '--metrics-port=0']).values;
  const { options, config } = await corefileForwarder(values, { log });
  const forwarder = launchForwarder({
    program: 'forwarder',
    options: { ...options, metricsAddress: '127.0.0.1', metricsPort: 0 },
    config,
    workers: 1,
    workersFlag: '--workers',
    metricsFlags: 'the Corefile’s prometheus',
    log,
  });
  const { port } = await forwarder.start();
  cleanups.push(() => forwarder.shutdown());
  return (name: string, type: number = QTYPE.A) =>
    queryDns({ host: '127.0.0.1', port }, name, type, { timeoutMs: 5000 });
}

const noOpenssl = hasCommand('openssl') ? undefined : 'openssl is not installed';
if (noOpenssl) console.warn(`skipping the DNS-over-TLS forward test: ${noOpenssl}`);

describe('a Corefile’s forward', () => {
  it.skipIf(noOpenssl)(
    'asks tls:// servers over TLS, checking the certificate against tls_servername and the CA, on one kept connection',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'corefile-forward-'));
      await runChecked('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=dns.example.net',
        '-addext',
        'subjectAltName=DNS:dns.example.net',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'ca.pem'),
      ]);
      const cert = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'ca.pem')) };
      const behind = await upstream({ 'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.80' }] });
      const front = await tlsFront(behind, cert);
      const ask = await corefileMode(
        `.:0 {\n bind 127.0.0.1\n forward . tls://127.0.0.1:${front.port} {\n  tls_servername dns.example.net\n  tls ca.pem\n }\n}\n`.replace(
          'tls ca.pem',
          `tls ${join(dir, 'ca.pem')}`,
        ),
        dir,
      );
      for (let i = 0; i < 5; i++) {
        const reply = await ask('www.example.org');
        expect(reply.flags.rcode).toBe(RCODE.NOERROR);
        expect(reply.answers.map((a) => a.address)).toEqual(['192.0.2.80']);
      }
      // Cached after the first: ask names that miss, to see the connection kept.
      await ask('a.example.org');
      await ask('b.example.org');
      expect(front.accepted).toHaveLength(1);
      expect(behind.queries.length).toBeGreaterThanOrEqual(3);

      // A name the certificate does not hold: no answer comes over that connection.
      const wrongName = await corefileMode(
        `.:0 {\n bind 127.0.0.1\n forward . tls://127.0.0.1:${front.port} {\n  tls_servername other.example.net\n  tls ${join(dir, 'ca.pem')}\n }\n}\n`,
        mkdtempSync(join(tmpdir(), 'corefile-forward-')),
      );
      expect((await wrongName('c.example.org')).flags.rcode).toBe(RCODE.SERVFAIL);
    },
  );

  it('sends an except name to the forward that takes it, and one nothing takes gets SERVFAIL', async () => {
    const main = await upstream({ 'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.1' }] });
    const corp = await upstream({ 'www.corp.example.': [{ type: QTYPE.A, address: '198.51.100.1' }] });
    const ask = await corefileMode(
      `.:0 {\n bind 127.0.0.1\n forward . ${main.host}:${main.port} {\n  except corp.example internal.example\n }\n forward corp.example ${corp.host}:${corp.port}\n}\n`,
      mkdtempSync(join(tmpdir(), 'corefile-forward-')),
    );
    expect((await ask('www.example.org')).answers.map((a) => a.address)).toEqual(['192.0.2.1']);
    expect((await ask('www.corp.example')).answers.map((a) => a.address)).toEqual(['198.51.100.1']);
    expect((await ask('www.internal.example')).flags.rcode).toBe(RCODE.SERVFAIL);
    expect(main.queries.map((q) => q.name)).toEqual(['www.example.org.']);
  });

  it('rewrite end to end: edns0 options go upstream with the question, TTLs and RCODEs come back rewritten', async () => {
    const behind = await upstream({ 'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.7', ttl: 300 }] });
    const ask = await corefileMode(
      [
        '.:0 {',
        ' bind 127.0.0.1',
        ' rewrite continue edns0 local set 0xffee abcd',
        ' rewrite continue edns0 subnet set 24 56',
        ' rewrite continue ttl suffix .example.org 5-10',
        ' rewrite rcode exact gone.example.org NXDOMAIN NOERROR',
        ` forward . ${behind.host}:${behind.port}`,
        '}',
        '',
      ].join('\n'),
      mkdtempSync(join(tmpdir(), 'corefile-forward-')),
    );
    const reply = await ask('www.example.org');
    expect(reply.answers.map((a) => [a.address, a.ttl])).toEqual([['192.0.2.7', 10]]);
    const options = ednsOptions(behind.queries[0]?.raw as Buffer) ?? [];
    expect(options.map((o) => [o.code, o.data.toString('hex')])).toEqual([
      [0xffee, Buffer.from('abcd').toString('hex')],
      // ECS: family 1, source /24, scope 0, the client's first three octets (127.0.0).
      [8, '000118007f0000'],
    ]);
    expect((await ask('gone.example.org')).flags.rcode).toBe(RCODE.NOERROR);
    expect((await ask('other.example.org')).flags.rcode).toBe(RCODE.NXDOMAIN);
  });

  it('runs the plugins in CoreDNS’s order, not the order written: the last lines of this Corefile act first', async () => {
    const behind = await upstream({
      'www.example.org.': [{ type: QTYPE.A, address: '192.0.2.7', ttl: 300 }],
      'pinned.example.org.': [{ type: QTYPE.A, address: '198.51.100.1' }],
      'a.example.org.': [{ type: QTYPE.TXT, text: ['from the upstream'] }],
    });
    const lines: string[] = [];
    const log = createLogger({ component: 'forwarder', write: (line) => lines.push(line) });
    // Written backwards from plugin.cfg: forward first, log last.
    const ask = await corefileMode(
      [
        '.:0 {',
        ' bind 127.0.0.1',
        ` forward . ${behind.host}:${behind.port}`,
        ' cache 30',
        ' hosts {',
        '  192.0.2.99 pinned.example.org',
        '  fallthrough',
        ' }',
        ' template IN TXT example.org {',
        '  answer "{{ .Name }} 60 IN TXT \\"templated\\""',
        ' }',
        ' rewrite name exact old.example.org www.example.org',
        ' log',
        '}',
        '',
      ].join('\n'),
      mkdtempSync(join(tmpdir(), 'corefile-order-')),
      log,
    );
    // hosts before forward: its entry answers, the upstream's record of the name never does.
    expect((await ask('pinned.example.org')).answers.map((a) => a.address)).toEqual(['192.0.2.99']);
    // template before forward.
    expect((await ask('a.example.org', QTYPE.TXT)).answers.map((a) => a.text)).toEqual([['templated']]);
    // rewrite before the cache and forward; the cache in front of forward: asked once.
    for (let i = 0; i < 3; i++)
      expect((await ask('old.example.org')).answers.map((a) => [a.name, a.address])).toEqual([
        ['old.example.org.', '192.0.2.7'],
      ]);
    expect(behind.queries.map((q) => q.name)).toEqual(['www.example.org.']);
    // log before everything: every query has its line, cache hits and hosts answers too.
    const logged = lines.filter((l) => l.includes('"msg":"query"') || l.includes('old.example.org'));
    expect(logged.filter((l) => l.includes('old.example.org')).length).toBe(3);
    expect(logged.some((l) => l.includes('pinned.example.org'))).toBe(true);
  });
});
