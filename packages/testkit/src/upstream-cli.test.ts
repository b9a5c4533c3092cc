import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { QTYPE, queryDns } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import { runCommand } from './command.js';
import { launchProcess } from './process-launcher.js';

// The test upstream as a process, with its records from a file (more than a command line holds:
// the bench's 10,000 names are ~1 MB of JSON, past the kernel's limit for one argument).
const CLI = fileURLToPath(new URL('../dist/upstream-cli.js', import.meta.url));

describe('upstream-cli', () => {
  it('answers the records of --records-file beside those of --records', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'cdns-upstream-')), 'records.json');
    const records: Record<string, unknown[]> = {};
    for (let i = 0; i < 3000; i++)
      records[`svc-${i}.example.org.`] = [{ type: 1, address: `10.0.${i >> 8}.${i & 255}` }];
    writeFileSync(file, JSON.stringify(records));
    const upstream = await launchProcess({
      script: CLI,
      args: [
        '--port=0',
        `--records-file=${file}`,
        '--records={"inline.example.org.":[{"type":1,"address":"192.0.2.7"}]}',
      ],
    });
    try {
      const server = { host: '127.0.0.1', port: Number(upstream.ready.port) };
      const fromFile = await queryDns(server, 'svc-2999.example.org', QTYPE.A);
      expect(fromFile.answers.map((a) => ('address' in a ? a.address : undefined))).toEqual(['10.0.11.183']);
      const inline = await queryDns(server, 'inline.example.org', QTYPE.A);
      expect(inline.answers.map((a) => ('address' in a ? a.address : undefined))).toEqual(['192.0.2.7']);
    } finally {
      await upstream.stop();
    }
  });

  it('answers a name with records below it NODATA, as a real server does, and a name with none NXDOMAIN', async () => {
    const upstream = await launchProcess({
      script: CLI,
      args: ['--port=0', '--records={"web.Shop.svc.cluster.local.":[{"type":1,"address":"10.96.1.10"}]}'],
    });
    try {
      const server = { host: '127.0.0.1', port: Number(upstream.ready.port) };
      for (const name of ['shop.svc.cluster.local', 'SVC.cluster.local', 'local'])
        expect([name, (await queryDns(server, name, QTYPE.A)).flags.rcode]).toEqual([name, 0]);
      for (const name of ['other.svc.cluster.local', 'x.web.shop.svc.cluster.local'])
        expect([name, (await queryDns(server, name, QTYPE.A)).flags.rcode]).toEqual([name, 3]);
    } finally {
      await upstream.stop();
    }
  });

  it('answers after --delay: an upstream that far away', async () => {
    const upstream = await launchProcess({
      script: CLI,
      args: ['--port=0', '--delay=300ms', '--records={"far.example.org.":[{"type":1,"address":"192.0.2.9"}]}'],
    });
    try {
      const started = performance.now();
      const reply = await queryDns(
        { host: '127.0.0.1', port: Number(upstream.ready.port) },
        'far.example.org',
        QTYPE.A,
      );
      expect(reply.answers).toHaveLength(1);
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      await upstream.stop();
    }
  });

  it('names the flag and the file when the file cannot be read or is not JSON, and exits non-zero', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cdns-upstream-'));
    const missing = join(dir, 'absent.json');
    const absent = await runCommand(process.execPath, [CLI, `--records-file=${missing}`], { timeoutMs: 20_000 });
    expect(absent.status).not.toBe(0);
    expect(absent.stderr).toContain('--records-file');
    expect(absent.stderr).toContain(missing);
    expect(absent.stderr).toContain('ENOENT');

    const garbled = join(dir, 'garbled.json');
    writeFileSync(garbled, '{"a.example.org.": [');
    const bad = await runCommand(process.execPath, [CLI, `--records-file=${garbled}`], { timeoutMs: 20_000 });
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain('--records-file');
    expect(bad.stderr).toContain('JSON');
  });
});
