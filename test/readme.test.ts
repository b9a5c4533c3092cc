import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { nodeCacheFlags } from '@cluster-dns/forwarder';
import { demoFlags } from '@cluster-dns/testkit';
import { ERROR_CODES } from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(`${root}/README.md`, 'utf8');
const troubleshooting = readFileSync(`${root}/docs/troubleshooting.md`, 'utf8');

describe('README', () => {
  it('the node-local README names every node-cache flag, node-local port and metric', () => {
    const forwarder = readFileSync(`${root}/packages/forwarder/src/node-local/README.md`, 'utf8');
    for (const name of Object.keys(nodeCacheFlags)) expect(forwarder).toContain(`\`-${name}\``);
    for (const text of ['coredns_nodecache_setup_errors_total', '/health', '9253', '9353', '8080'])
      expect(forwarder).toContain(text);
  });

  it('names every flag of the demo launcher', () => {
    for (const name of Object.keys(demoFlags)) expect(readme).toContain(`\`--${name}\``);
  });

  it('documents every error code of the catalog in the troubleshooting page, and nothing that is not in it', () => {
    for (const code of Object.keys(ERROR_CODES)) expect(troubleshooting).toContain(`| \`${code}\` |`);
    const table = troubleshooting.slice(troubleshooting.indexOf('## Errors and exit codes'));
    const documented = [...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  it('points nowhere outside the repository', () => {
    expect(readme).not.toMatch(/\]\(\.\.\/|`\.\.\/shared/);
  });

  it('gives the two commands, and .ci/run runs the test one', () => {
    const start = 'npx --yes pnpm@12.4.2 install && npx --yes pnpm@12.4.2 demo';
    const test = 'npx --yes pnpm@12.4.2 install --frozen-lockfile && npx --yes pnpm@12.4.2 test';
    expect(readme).toContain(start);
    expect(readme).toContain(test);
    const ci = readFileSync(`${root}/.ci/run`, 'utf8');
    expect(ci).toContain('npx --yes pnpm@12.4.2 install --frozen-lockfile');
    expect(ci).toContain('npx --yes pnpm@12.4.2 test');
  });
});
