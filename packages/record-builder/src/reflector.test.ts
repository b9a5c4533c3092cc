import { createSilentLogger } from '@cluster-dns/runtime';
import { waitFor } from '@cluster-dns/testkit';
import type { StateFingerprint } from '@cluster-dns/wire';
import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ApiClient, WatchEventType } from './api-client.js';
import { createReflector } from './reflector.js';

// The reflector's progress (zone-position.ts): what it has handed to the sink up to which
// resourceVersion, and a fingerprint of the objects then. Two reflectors that reach the same
// objects by different histories (one listed early and watched, one listed late) report the
// same fingerprint: what lets a replica that started later recognise a copy of the state it listed.

const object = (name: string, rv: number): KubernetesObject => ({
  metadata: { namespace: 'ns', name, resourceVersion: String(rv) },
});

/** An API serving one list (paged, one page) and then the given watch events, and nothing more. */
function api(list: { version: number; items: KubernetesObject[] }, events: Array<[WatchEventType, KubernetesObject]>) {
  const client: ApiClient = {
    async listPage(_path, _params, onItem) {
      for (const item of list.items) onItem(item);
      return { resourceVersion: String(list.version), continueToken: '' } as Awaited<ReturnType<ApiClient['listPage']>>;
    },
    async watch(_path, params, onEvent) {
      if (params.sendInitialEvents) throw Object.assign(new Error('no WatchList'), { status: 400 });
      for (const [type, o] of events.splice(0)) onEvent(type, o);
      // Then an open, quiet watch.
      return () => {};
    },
  };
  return client;
}

function reflect(client: ApiClient, initialKnown: string[] = []) {
  const progress: Array<{ version: string; fingerprint: StateFingerprint; listed: boolean }> = [];
  const reflector = createReflector({
    api: client,
    path: '/api/v1/services',
    sink: { upsert: () => {}, remove: () => {} },
    log: createSilentLogger(),
    hooks: {
      onWatching: () => {},
      onSynced: () => {},
      onError: () => {},
      onRelist: () => {},
      onEvent: () => {},
      onProgress: (version, fingerprint, listed) => progress.push({ version, fingerprint, listed }),
    },
    pageSize: 500,
    retryBaseMs: 10,
    retryMaxMs: 10,
    streamLists: false,
    initialKnown,
  });
  reflector.start();
  return { reflector, progress };
}

describe('reflector progress: the version handed over up to, and the objects’ fingerprint', () => {
  it('gives the same fingerprint for the same objects, whatever history brought them', async () => {
    // Listed early at 10 (x@5, y@7), then x changed at 12, y deleted at 13, z added at 14.
    const early = reflect(
      api({ version: 10, items: [object('x', 5), object('y', 7)] }, [
        ['MODIFIED', object('x', 12)],
        ['DELETED', object('y', 13)],
        ['ADDED', object('z', 14)],
      ]),
    );
    // Listed late at 14: x@12 and z@14.
    const late = reflect(api({ version: 14, items: [object('x', 12), object('z', 14)] }, []));
    // A worker restarted after holding x and y: its relist drops y and brings z.
    const restarted = reflect(api({ version: 14, items: [object('x', 12), object('z', 14)] }, []), ['ns/x', 'ns/y']);
    await waitFor(() => early.progress.length === 4 && late.progress.length === 1 && restarted.progress.length === 1, {
      what: 'each reflector’s progress',
    });
    for (const r of [early, late, restarted]) r.reflector.stop();
    expect(early.progress.map((p) => [p.version, p.listed, p.fingerprint.count])).toEqual([
      ['10', true, 2],
      ['12', false, 2],
      ['13', false, 1],
      ['14', false, 2],
    ]);
    const atEnd = early.progress.at(-1)?.fingerprint;
    expect(late.progress[0]?.fingerprint).toEqual(atEnd);
    expect(restarted.progress[0]?.fingerprint).toEqual(atEnd);
    // The state at 12 (x@12, y@7) is another state: another fingerprint.
    expect(early.progress[1]?.fingerprint).not.toEqual(atEnd);
  });
});
