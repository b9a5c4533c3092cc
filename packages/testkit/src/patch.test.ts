import { describe, expect, it } from 'vitest';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.js';

const service = () => ({
  metadata: { name: 'web', labels: { app: 'web', tier: 'front' } },
  spec: {
    ports: [
      { name: 'http', port: 80 },
      { name: 'https', port: 443 },
    ],
    selector: { app: 'web' },
  },
});
const keys = (path: readonly string[]) => (path.join('.') === 'spec.ports' ? 'port' : undefined);

describe('PATCH bodies', () => {
  it('merge patch (RFC 7386): maps merge, null deletes, lists are replaced', () => {
    expect(
      mergePatch(service(), { metadata: { labels: { tier: null, env: 'prod' } }, spec: { ports: [{ port: 8080 }] } }),
    ).toEqual({
      metadata: { name: 'web', labels: { app: 'web', env: 'prod' } },
      spec: { ports: [{ port: 8080 }], selector: { app: 'web' } },
    });
  });

  it('JSON patch (RFC 6902): every operation in order, and a failed test rejects the whole patch', () => {
    const out = jsonPatch(service(), [
      { op: 'replace', path: '/spec/ports/0/port', value: 8080 },
      { op: 'add', path: '/spec/ports/-', value: { name: 'grpc', port: 9000 } },
      { op: 'remove', path: '/metadata/labels/tier' },
      { op: 'copy', from: '/metadata/name', path: '/metadata/labels/name' },
      { op: 'move', from: '/spec/selector', path: '/spec/chooser' },
      { op: 'test', path: '/spec/ports/2/port', value: 9000 },
    ]) as ReturnType<typeof service> & { spec: { chooser: unknown } };
    expect(out.spec.ports.map((p) => p.port)).toEqual([8080, 443, 9000]);
    expect(out.metadata.labels).toEqual({ app: 'web', name: 'web' });
    expect(out.spec.chooser).toEqual({ app: 'web' });
    expect(() => jsonPatch(service(), [{ op: 'test', path: '/metadata/name', value: 'db' }])).toThrow(PatchError);
    expect(() => jsonPatch(service(), [{ op: 'remove', path: '/spec/nothing' }])).toThrow(PatchError);
  });

  it('strategic merge patch: a keyed list merges by key, $patch: delete removes, $setElementOrder orders', () => {
    const out = strategicMergePatch(
      service(),
      {
        $setElementOrder: undefined,
        spec: {
          '$setElementOrder/ports': [{ port: 9000 }, { port: 80 }],
          ports: [
            { name: 'web', port: 80 },
            { port: 443, $patch: 'delete' },
            { name: 'grpc', port: 9000 },
          ],
        },
        metadata: { labels: { tier: null } },
      },
      keys,
    ) as ReturnType<typeof service>;
    expect(out.spec.ports).toEqual([
      { name: 'grpc', port: 9000 },
      { name: 'web', port: 80 },
    ]);
    expect(out.metadata.labels).toEqual({ app: 'web' });
  });

  it('strategic merge patch: $patch: replace, $retainKeys and $deleteFromPrimitiveList', () => {
    const out = strategicMergePatch(
      {
        metadata: { finalizers: ['a', 'b', 'c'] },
        spec: { selector: { app: 'web', x: '1' }, type: 'ClusterIP', a: 1 },
      },
      {
        metadata: { '$deleteFromPrimitiveList/finalizers': ['b'] },
        spec: { selector: { $patch: 'replace', app: 'db' }, $retainKeys: ['selector', 'type'] },
      },
      keys,
    );
    expect(out).toEqual({ metadata: { finalizers: ['a', 'c'] }, spec: { selector: { app: 'db' }, type: 'ClusterIP' } });
  });
});
