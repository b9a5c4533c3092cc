import {
  buildIxfrQuery,
  buildQueryMessage,
  encodeMessage,
  parseQuery,
  QTYPE,
  RCODE,
  toFqdn,
  ZoneChangeReader,
} from '@cluster-dns/wire';
import type { V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { toPodInfo } from './kube-objects.js';
import { createTestZone } from './test-zone.js';

// The client map: `<a-b-c-d>.client.dns.<zone>` TXT says which namespace asks from a pod address
// and whether its search path is the kubelet's default: what a forwarder's autopath reads.

const ALLOWED = '10.0.0.5';
const NAME = 'client.dns.cluster.local.';
const txtOf = (t: ReturnType<typeof createTestZone>, label: string) => {
  const reply = t.ask(`${label}.${NAME}`, QTYPE.TXT);
  return reply.flags.rcode === RCODE.NXDOMAIN ? 'NXDOMAIN' : reply.answers.map((r) => (r.text ?? []).join(' '));
};
const pod = (namespace: string, name: string, ip: string, searchDefault = true) => ({
  namespace,
  name,
  ips: [ip],
  searchDefault,
});

describe('the client map (--pods=verified)', () => {
  it('names the namespace of the pod at an address, and whether its search path is the default', () => {
    const t = createTestZone({ pods: 'verified' });
    t.state.upsertPod(pod('shop', 'web-0', '10.244.1.5'));
    t.state.upsertPod(pod('shop', 'custom', '10.244.1.6', false));
    t.state.upsertPod({ namespace: 'v6', name: 'p', ips: ['fd00::7'], searchDefault: true });
    expect(txtOf(t, '10-244-1-5')).toEqual(['namespace=shop search=default']);
    expect(txtOf(t, '10-244-1-6')).toEqual(['namespace=shop search=own']);
    expect(txtOf(t, 'fd00--7')).toEqual(['namespace=v6 search=default']);
    expect(txtOf(t, '10-244-1-9')).toBe('NXDOMAIN');
    expect(txtOf(t, 'not-an-address')).toBe('NXDOMAIN');
    // The parent is an empty non-terminal: NODATA, as for names below it.
    expect(t.ask(NAME, QTYPE.TXT).flags.rcode).toBe(RCODE.NOERROR);
  });

  it('answers it to this host only (the Pod’s forwarder), and never keeps it ready for the answer lane', () => {
    const t = createTestZone({ pods: 'verified' });
    t.state.upsertPod(pod('shop', 'web-0', '10.244.1.5'));
    const name = `10-244-1-5.${NAME}`;
    expect(t.ask(name, QTYPE.TXT, { remote: '10.244.9.9' }).flags.rcode).toBe(RCODE.REFUSED);
    expect(t.ask(name, QTYPE.TXT).answers).toHaveLength(1);
    // The answer lane answers from the answer cache without knowing who asks: nothing there.
    expect(t.responder.cache.get(parseQuery(encodeMessage(buildQueryMessage(1, name, QTYPE.TXT))))).toBeUndefined();
  });

  it('is not served unless pods are watched', () => {
    const t = createTestZone({ pods: 'insecure' });
    t.state.upsertPod(pod('shop', 'web-0', '10.244.1.5'));
    expect(txtOf(t, '10-244-1-5')).toBe('NXDOMAIN');
  });

  it('never names an address for two namespaces: a reused address is nobody’s until the old pod is gone', () => {
    const t = createTestZone({ pods: 'verified' });
    t.state.upsertPod(pod('old', 'done', '10.244.1.5'));
    t.state.upsertPod(pod('new', 'started', '10.244.1.5'));
    expect(txtOf(t, '10-244-1-5')).toBe('NXDOMAIN');
    t.state.deletePod('old', 'done');
    expect(txtOf(t, '10-244-1-5')).toEqual(['namespace=new search=default']);
    // A pod that moves to another address leaves its old one.
    t.state.upsertPod(pod('new', 'started', '10.244.1.8'));
    expect(txtOf(t, '10-244-1-5')).toBe('NXDOMAIN');
    expect(txtOf(t, '10-244-1-8')).toEqual(['namespace=new search=default']);
  });

  it('says search=own when any pod at the address has its own (two hostNetwork-free pods of one namespace)', () => {
    const t = createTestZone({ pods: 'verified' });
    t.state.upsertPod(pod('shop', 'a', '10.244.1.5'));
    t.state.upsertPod(pod('shop', 'b', '10.244.1.5', false));
    expect(txtOf(t, '10-244-1-5')).toEqual(['namespace=shop search=own']);
  });

  it('names the address in the IXFR of a pod change, so a forwarder holding it drops it', () => {
    const t = createTestZone({ pods: 'verified', transferTo: [ALLOWED], journalBytes: 1 << 20 });
    t.state.upsertPod(pod('old', 'done', '10.244.1.5'));
    const serial = t.state.serial;
    t.state.deletePod('old', 'done');
    t.state.upsertPod(pod('new', 'started', '10.244.1.5'));
    const reader = new ZoneChangeReader();
    for (const m of t.messages(buildIxfrQuery(8, toFqdn('cluster.local'), serial), ALLOWED)) if (reader.push(m)) break;
    const result = reader.result;
    expect(result?.kind).toBe('incremental');
    expect(result?.kind === 'incremental' ? [...result.names] : []).toContain(`10-244-1-5.${NAME}`);
  });
});

describe('toPodInfo: whose search path is the kubelet’s default', () => {
  const base = (spec: Partial<V1PodSpec>, phase = 'Running'): V1Pod => ({
    metadata: { namespace: 'shop', name: 'p' },
    spec: { containers: [], ...spec },
    status: { phase, podIP: '10.244.1.5', podIPs: [{ ip: '10.244.1.5' }] },
  });
  it.each([
    ['no dnsPolicy (ClusterFirst)', {}, true],
    ['ClusterFirst', { dnsPolicy: 'ClusterFirst' }, true],
    ['hostNetwork', { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }, false],
    ['hostNetwork with ClusterFirst (the node’s resolv.conf)', { hostNetwork: true }, false],
    ['Default', { dnsPolicy: 'Default' }, false],
    ['None', { dnsPolicy: 'None', dnsConfig: { nameservers: ['10.96.0.10'] } }, false],
    ['dnsConfig searches', { dnsConfig: { searches: ['corp.example'] } }, false],
    ['dnsConfig options', { dnsConfig: { options: [{ name: 'ndots', value: '2' }] } }, false],
    ['dnsConfig nameservers only', { dnsConfig: { nameservers: ['10.0.0.1'] } }, true],
  ] as const)('%s', (_label, spec, searchDefault) => {
    expect(toPodInfo(base(spec as Partial<V1PodSpec>))?.searchDefault).toBe(searchDefault);
  });
  it('gives an ended pod no address: the kubelet has released it for reuse', () => {
    expect(toPodInfo(base({}, 'Succeeded'))?.ips).toEqual([]);
    expect(toPodInfo(base({}, 'Failed'))?.ips).toEqual([]);
    expect(toPodInfo(base({}, 'Running'))?.ips).toEqual(['10.244.1.5']);
  });
});
