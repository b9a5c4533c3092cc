import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasCommand, runCommand, waitFor } from '@cluster-dns/testkit';
import { type DecodedMessage, QTYPE, queryDns, RCODE } from '@cluster-dns/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.js';

// The real kubectl against testkit's API server with the record-builder and the forwarder on it,
// as a new user drives the demo: apply, get, patch in its three forms, edit, replace, delete, and
// the DNS answers through the forwarder following each change.
const kubectlThere = hasCommand('kubectl');
if (!kubectlThere) console.warn('skipping the kubectl tests: kubectl is not on the PATH');

let stack: Stack;
let kubeconfig = '';
let dir = '';
/** Runs kubectl without blocking: the API server it talks to lives in this process. */
const kubectl = async (args: string[], input?: string, env: Record<string, string> = {}) => {
  const run = await runCommand('kubectl', args, {
    input: input ?? '',
    timeoutMs: 20_000,
    env: { KUBECONFIG: kubeconfig, ...env },
  });
  return { status: run.status, out: run.stdout, err: run.stderr };
};
const ok = async (args: string[], input?: string, env?: Record<string, string>) => {
  const r = await kubectl(args, input, env);
  expect(r.status, `kubectl ${args.join(' ')}: ${r.err}`).toBe(0);
  return r.out;
};
const ask = (name: string, type: number): Promise<DecodedMessage> =>
  queryDns({ host: '127.0.0.1', port: stack.fwPort }, name, type, { timeoutMs: 5000 });
const until = (what: string, check: (m: DecodedMessage) => boolean, name: string, type: number) =>
  waitFor(async () => check(await ask(name, type)) || undefined, { what, timeoutMs: 10_000 });

const SERVICE = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels: { app: web }
spec:
  clusterIP: 10.96.7.7
  selector: { app: web }
  ports:
    - { name: http, port: 80, protocol: TCP }
`;

describe.skipIf(!kubectlThere)('kubectl against the demo stack', () => {
  beforeAll(async () => {
    stack = await startStack({ objects: [] });
    dir = mkdtempSync(join(tmpdir(), 'kubectl-'));
    kubeconfig = join(dir, 'kubeconfig');
    await stack.api.writeKubeconfig(kubeconfig);
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  it('applies a Service (validated through OpenAPI) and the forwarder answers for it', async () => {
    writeFileSync(join(dir, 'svc.yaml'), SERVICE);
    expect(await ok(['apply', '-f', join(dir, 'svc.yaml')])).toContain('service/web created');
    await until(
      'the A record',
      (m) => m.answers.some((a) => a.address === '10.96.7.7'),
      'web.shop.svc.cluster.local',
      QTYPE.A,
    );
    // Applied again unchanged, then with a second port: a three-way strategic merge patch.
    expect(await ok(['apply', '-f', join(dir, 'svc.yaml')])).toContain('service/web unchanged');
    writeFileSync(
      join(dir, 'svc.yaml'),
      SERVICE.replace('protocol: TCP }', 'protocol: TCP }\n    - { name: metrics, port: 9090, protocol: TCP }'),
    );
    expect(await ok(['apply', '-f', join(dir, 'svc.yaml')])).toContain('service/web configured');
    await until(
      'the SRV record of the new port',
      (m) => m.answers.some((a) => a.port === 9090),
      '_metrics._tcp.web.shop.svc.cluster.local',
      QTYPE.SRV,
    );
  });

  it('shows the usual columns in get and get -o wide', async () => {
    const table = await ok(['get', 'svc', '-n', 'shop']);
    expect(table.split('\n')[0]?.split(/\s{2,}/)).toEqual([
      'NAME',
      'TYPE',
      'CLUSTER-IP',
      'EXTERNAL-IP',
      'PORT(S)',
      'AGE',
    ]);
    expect(table).toMatch(/^web\s+ClusterIP\s+10\.96\.7\.7\s+<none>\s+80\/TCP,9090\/TCP\s+\d+s/m);
    const wide = await ok(['get', 'svc', 'web', '-n', 'shop', '-o', 'wide']);
    expect(wide.split('\n')[0]).toContain('SELECTOR');
    expect(wide).toContain('app=web');
  });

  it('patches in merge, JSON and strategic form, and DNS follows', async () => {
    await ok(['patch', 'svc', 'web', '-n', 'shop', '--type=merge', '-p', '{"metadata":{"labels":{"tier":"front"}}}']);
    expect(await ok(['get', 'svc', 'web', '-n', 'shop', '-o', 'jsonpath={.metadata.labels.tier}'])).toBe('front');
    await ok([
      'patch',
      'svc',
      'web',
      '-n',
      'shop',
      '--type=json',
      '-p',
      '[{"op":"replace","path":"/spec/ports/0/port","value":8080}]',
    ]);
    await until(
      'the SRV port moved by a JSON patch',
      (m) => m.answers.some((a) => a.port === 8080),
      '_http._tcp.web.shop.svc.cluster.local',
      QTYPE.SRV,
    );
    // Strategic: the ports list merges by port, so this adds one and keeps the others.
    await ok([
      'patch',
      'svc',
      'web',
      '-n',
      'shop',
      '-p',
      '{"spec":{"ports":[{"name":"grpc","port":9000,"protocol":"TCP"}]}}',
    ]);
    expect(await ok(['get', 'svc', 'web', '-n', 'shop', '-o', 'jsonpath={.spec.ports[*].port}'])).toBe(
      '8080 9090 9000',
    );
    await until(
      'the SRV record added by a strategic patch',
      (m) => m.answers.some((a) => a.port === 9000),
      '_grpc._tcp.web.shop.svc.cluster.local',
      QTYPE.SRV,
    );
    // The cluster IP cannot change once set, as on a real API server.
    const immutable = await kubectl([
      'patch',
      'svc',
      'web',
      '-n',
      'shop',
      '--type=merge',
      '-p',
      '{"spec":{"clusterIP":"10.96.7.8"}}',
    ]);
    expect(immutable.status).not.toBe(0);
    expect(immutable.err).toContain('may not change once set');
  });

  it('refuses an unknown field under strict validation, naming it', async () => {
    const bad = await kubectl(['apply', '-f', '-'], SERVICE.replace('selector:', 'selectr:'));
    expect(bad.status).not.toBe(0);
    expect(bad.err).toContain('unknown field "spec.selectr"');
  });

  it('edits with $EDITOR and replaces from a file, and DNS follows', async () => {
    await ok(['edit', 'svc', 'web', '-n', 'shop'], undefined, {
      EDITOR: 'sed -i s/name:\\ grpc/name:\\ rpc/',
      KUBE_EDITOR: '',
    });
    await until(
      'the renamed port',
      (m) => m.answers.some((a) => a.port === 9000),
      '_rpc._tcp.web.shop.svc.cluster.local',
      QTYPE.SRV,
    );
    const yaml = await ok(['get', 'svc', 'web', '-n', 'shop', '-o', 'yaml']);
    ok(
      ['replace', '-f', '-'],
      yaml.replace('externalTrafficPolicy', 'externalTrafficPolicy').replace(/name: rpc/, 'name: rpc2'),
    );
    await until(
      'the replaced port name',
      (m) => m.answers.some((a) => a.port === 9000),
      '_rpc2._tcp.web.shop.svc.cluster.local',
      QTYPE.SRV,
    );
    const stale = await kubectl(['replace', '-f', '-'], yaml);
    expect(stale.status).not.toBe(0);
    expect(stale.err).toContain('the object has been modified');
  });

  it('creates an ExternalName Service, changes its target with a patch, deletes both, and DNS follows', async () => {
    await ok(
      ['create', '-f', '-'],
      'apiVersion: v1\nkind: Service\nmetadata: { name: pay, namespace: shop }\nspec: { type: ExternalName, externalName: pay.example.org }\n',
    );
    // kubectl's generators send protobuf, which testkit reads for the kinds they create; a
    // Service created without a cluster IP gets one allocated, as on a real API server.
    await ok(['create', 'namespace', 'tools']);
    await ok(['create', 'service', 'clusterip', 'gen', '-n', 'tools', '--tcp=80:8080']);
    const allocated = (await ok(['get', 'svc', 'gen', '-n', 'tools', '-o', 'jsonpath={.spec.clusterIP}'])).trim();
    expect(allocated).toMatch(/^10\.96\.\d+\.\d+$/);
    await until(
      'the allocated cluster IP',
      (m) => m.answers.some((a) => a.address === allocated),
      'gen.tools.svc.cluster.local',
      QTYPE.A,
    );
    await ok(['create', 'service', 'externalname', 'alias', '-n', 'tools', '--external-name=www.example.org']);
    await until(
      'the generated CNAME',
      (m) => m.answers.some((a) => a.target === 'www.example.org.'),
      'alias.tools.svc.cluster.local',
      QTYPE.CNAME,
    );
    await ok(['create', 'configmap', 'cfg', '-n', 'tools', '--from-literal=stubDomains={}']);
    expect(await ok(['get', 'cm', 'cfg', '-n', 'tools', '-o', 'jsonpath={.data.stubDomains}'])).toBe('{}');
    // A body that is not the k8s protobuf envelope gets a clear refusal, naming the problem.
    const garbage = await fetch(`${stack.api.url}/api/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.kubernetes.protobuf' },
      body: Buffer.from('k8s\u0000\u00ff', 'latin1'),
    });
    expect(garbage.status).toBe(415);
    expect(await garbage.text()).toContain('truncated varint');
    await until(
      'the CNAME',
      (m) => m.answers.some((a) => a.type === QTYPE.CNAME && a.target === 'pay.example.org.'),
      'pay.shop.svc.cluster.local',
      QTYPE.CNAME,
    );
    await ok([
      'patch',
      'svc',
      'pay',
      '-n',
      'shop',
      '--type=merge',
      '-p',
      '{"spec":{"externalName":"www.example.org"}}',
    ]);
    await until(
      'the new CNAME target',
      (m) => m.answers.some((a) => a.target === 'www.example.org.'),
      'pay.shop.svc.cluster.local',
      QTYPE.CNAME,
    );
    expect(await ok(['delete', 'svc', 'web', 'pay', '-n', 'shop'])).toContain('service "web" deleted');
    await until(
      'NXDOMAIN after the delete',
      (m) => m.flags.rcode === RCODE.NXDOMAIN,
      'web.shop.svc.cluster.local',
      QTYPE.A,
    );
    await until(
      'NXDOMAIN for the ExternalName',
      (m) => m.flags.rcode === RCODE.NXDOMAIN,
      'pay.shop.svc.cluster.local',
      QTYPE.CNAME,
    );
    expect(await ok(['get', 'svc', '-n', 'shop'])).toBe('');
    await ok(['delete', 'namespace', 'tools']);
  });
});
