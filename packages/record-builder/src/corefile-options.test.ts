import { readFileSync } from 'node:fs';
import { CorefileError, parseFlags } from '@cluster-dns/runtime';
import { describe, expect, it } from 'vitest';
import { recordBuilderFromCorefile } from './corefile-options.js';
import { recordBuilderFlags, toRecordBuilderOptions, withCorefile } from './options.js';

const KUBEADM = readFileSync(new URL('../../../test/fixtures/kubeadm.Corefile', import.meta.url), 'utf8');

describe('the record-builder’s part of a Corefile', () => {
  it('takes kubeadm’s kubernetes plugin and ready over the flags, leaving its own ports', () => {
    const flags = toRecordBuilderOptions(parseFlags(recordBuilderFlags, ['--ttl=60', '--dns-port=10053']).values);
    const options = withCorefile(flags, recordBuilderFromCorefile(KUBEADM, 'Corefile'));
    expect([options.zone, options.pods, options.ttlSeconds, options.dnsPort]).toEqual([
      'cluster.local.',
      'insecure',
      30,
      10053,
    ]);
    expect(options.readyAddress).toEqual({ host: '0.0.0.0', port: 8181 });
    expect([options.namespaces, options.ignoreEmptyService, options.endpointPodNames]).toEqual([
      undefined,
      false,
      false,
    ]);
  });

  it('takes the API server and the answers’ options', () => {
    const got = recordBuilderFromCorefile(
      `.:53 {
        kubernetes example.local in-addr.arpa {
          kubeconfig /etc/kube/config admin
          namespaces shop data
          ignore empty_service
          endpoint_pod_names
        }
      }`,
      'Corefile',
    );
    expect(got).toMatchObject({
      zone: 'example.local.',
      pods: 'disabled',
      ttlSeconds: 5,
      kubecfgFile: '/etc/kube/config',
      kubeContext: 'admin',
      namespaces: ['shop', 'data'],
      ignoreEmptyService: true,
      endpointPodNames: true,
      ready: undefined,
    });
  });

  it('takes multicluster’s zone as the clusterset zone, apart from the cluster zone', () => {
    const text = `.:53 {
      kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
        multicluster clusterset.local
      }
    }`;
    const flags = toRecordBuilderOptions(parseFlags(recordBuilderFlags, []).values);
    const options = withCorefile(flags, recordBuilderFromCorefile(text, 'Corefile'));
    expect([options.zone, options.multiclusterZone]).toEqual(['cluster.local.', 'clusterset.local.']);
    expect(flags.multiclusterZone).toBeUndefined();
  });

  it.each([
    [
      'two multicluster zones',
      '.:53 {\n kubernetes cluster.local a.local b.local {\n  multicluster a.local b.local\n }\n}',
      2,
      'one clusterset zone',
    ],
    ['no kubernetes plugin', '.:53 {\n forward . 1.1.1.1\n}', 1, 'no kubernetes plugin'],
    ['two cluster zones', '.:53 {\n kubernetes a.local b.local\n}', 2, 'exactly one cluster zone'],
  ])('refuses %s, naming the line', (_what, text, line, words) => {
    expect(() => recordBuilderFromCorefile(text, 'Corefile')).toThrow(CorefileError);
    try {
      recordBuilderFromCorefile(text, 'Corefile');
    } catch (error) {
      expect((error as CorefileError).line).toBe(line);
      expect((error as Error).message).toContain(words);
    }
  });
});

describe('the kubernetes plugin’s options as flags (the kube-dns layout)', () => {
  it('reads --namespaces (repeated or comma-separated), --ignore-empty-service and --endpoint-pod-names', () => {
    const options = toRecordBuilderOptions(
      parseFlags(recordBuilderFlags, [
        '--namespaces=shop,data',
        '--namespaces=default',
        '--ignore-empty-service',
        '--endpoint-pod-names',
      ]).values,
    );
    expect([options.namespaces, options.ignoreEmptyService, options.endpointPodNames]).toEqual([
      ['shop', 'data', 'default'],
      true,
      true,
    ]);
    const none = toRecordBuilderOptions(parseFlags(recordBuilderFlags, []).values);
    expect([none.namespaces, none.ignoreEmptyService, none.endpointPodNames]).toEqual([undefined, false, false]);
    expect(() => parseFlags(recordBuilderFlags, ['--namespaces=Not_A_Namespace'])).toThrow(/--namespaces/);
  });

  it('reads --multicluster-zone, and refuses one that is no zone or overlaps --domain, naming the flag', () => {
    const read = (...args: string[]) => toRecordBuilderOptions(parseFlags(recordBuilderFlags, args).values);
    expect(read('--multicluster-zone=clusterset.local').multiclusterZone).toBe('clusterset.local.');
    expect(() => read('--multicluster-zone=not_a.zone')).toThrow(/--multicluster-zone/);
    expect(() => read('--multicluster-zone=cluster.local')).toThrow(/--multicluster-zone.*apart from --domain/);
    expect(() => read('--multicluster-zone=set.cluster.local')).toThrow(/--multicluster-zone/);
  });
});
