import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  makeInformer,
  type V1EndpointSlice,
  type V1Service,
} from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtures, startApiServer, type TestApiServer, waitFor } from '../src/index.js';

const servers: TestApiServer[] = [];
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  for (const s of servers.splice(0)) await s.close();
});

async function serverWith(...objects: Parameters<typeof fixtures.service>[]) {
  const api = await startApiServer({ objects: objects.map((args) => fixtures.service(...args)) });
  servers.push(api);
  return api;
}

function serviceInformer(api: TestApiServer) {
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  const core = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Service>(kc, '/api/v1/services', () => core.listServiceForAllNamespaces());
  const events: string[] = [];
  const errors: unknown[] = [];
  informer.on('add', (s) => events.push(`add ${s.metadata?.namespace}/${s.metadata?.name}`));
  informer.on('update', (s) => events.push(`update ${s.metadata?.namespace}/${s.metadata?.name}`));
  informer.on('delete', (s) => events.push(`delete ${s.metadata?.namespace}/${s.metadata?.name}`));
  informer.on('error', (e) => errors.push(e));
  stops.push(() => informer.stop());
  return { informer, events, errors };
}

describe('testkit API server with the real client-node informer', () => {
  it('lists, then delivers ADDED, MODIFIED and DELETED events', async () => {
    const api = await serverWith(['default', 'kubernetes', { clusterIPs: ['10.96.0.1'] }]);
    const { informer, events } = serviceInformer(api);
    await informer.start();
    expect(events).toEqual(['add default/kubernetes']);
    await waitFor(() => api.openWatches() === 1, { what: 'the watch to open' });

    api.apply(fixtures.service('shop', 'cart', { clusterIPs: ['10.96.0.20'] }));
    api.apply(fixtures.service('shop', 'cart', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80 }] }));
    api.remove('Service', 'shop', 'cart');
    await waitFor(() => events.length === 4, { what: 'three watch events' });
    expect(events).toEqual(['add default/kubernetes', 'add shop/cart', 'update shop/cart', 'delete shop/cart']);
    expect(informer.list().map((s) => s.metadata?.name)).toEqual(['kubernetes']);
    const listed = api.requests.find((r) => !r.watch);
    expect(listed?.path).toBe('/api/v1/services');
    const watched = api.requests.find((r) => r.watch);
    expect(watched?.path).toMatch(/^\/api\/v1\/services\?watch=true&resourceVersion=\d+/);
  });

  it('gives objects uid, resourceVersion and creationTimestamp, and lists carry a resourceVersion', async () => {
    const api = await serverWith(['default', 'kubernetes', { clusterIPs: ['10.96.0.1'] }]);
    const response = await fetch(`${api.url}/api/v1/namespaces/default/services`);
    const list = (await response.json()) as { metadata: { resourceVersion: string }; items: V1Service[] };
    expect(Number(list.metadata.resourceVersion)).toBeGreaterThan(0);
    const [svc] = list.items;
    expect(svc?.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(svc?.metadata?.resourceVersion).toMatch(/^\d+$/);
    expect(Number.isNaN(Date.parse(String(svc?.metadata?.creationTimestamp)))).toBe(false);
    const other = await (await fetch(`${api.url}/api/v1/namespaces/kube-system/services`)).json();
    expect((other as { items: unknown[] }).items).toEqual([]);
  });

  it('resumes after a dropped watch without losing an event made while it was down', async () => {
    const api = await serverWith(['default', 'a', { clusterIPs: ['10.96.0.2'] }]);
    const { informer, events } = serviceInformer(api);
    await informer.start();
    await waitFor(() => api.openWatches() === 1, { what: 'the watch' });
    api.faults.dropWatches();
    api.apply(fixtures.service('default', 'b', { clusterIPs: ['10.96.0.3'] }));
    await waitFor(() => events.includes('add default/b'), { what: 'the event after reconnect' });
    const lists = api.requests.filter((r) => !r.watch && r.path.startsWith('/api/v1/services'));
    expect(lists).toHaveLength(1);
  });

  it('reports an abrupt reset as an error, and a restarted informer resumes from its version', async () => {
    const api = await serverWith(['default', 'a', { clusterIPs: ['10.96.0.2'] }]);
    const { informer, events, errors } = serviceInformer(api);
    await informer.start();
    await waitFor(() => api.openWatches() === 1, { what: 'the watch' });
    api.faults.dropWatches({ abrupt: true });
    await waitFor(() => errors.length > 0, { what: 'the informer error' });
    api.apply(fixtures.service('default', 'b', { clusterIPs: ['10.96.0.3'] }));
    await informer.start();
    await waitFor(() => events.includes('add default/b'), { what: 'the event after the restart' });
    const lists = api.requests.filter((r) => !r.watch && r.path.startsWith('/api/v1/services'));
    expect(lists).toHaveLength(1);
  });

  it('re-lists after 410 Gone and reports objects deleted meanwhile', async () => {
    const api = await serverWith(
      ['default', 'a', { clusterIPs: ['10.96.0.2'] }],
      ['default', 'gone', { clusterIPs: ['10.96.0.9'] }],
    );
    const { informer, events } = serviceInformer(api);
    await informer.start();
    await waitFor(() => api.openWatches() === 1, { what: 'the watch' });
    // Make the informer's version too old: change state, forget history, then cut the watch.
    const unsubscribe = api.store.subscribe(() => {});
    api.faults.dropWatches();
    api.remove('Service', 'default', 'gone');
    api.apply(fixtures.service('default', 'new', { clusterIPs: ['10.96.0.4'] }));
    api.faults.forgetHistory();
    unsubscribe();
    await waitFor(() => events.includes('delete default/gone') && events.includes('add default/new'), {
      what: 'the relist',
      timeoutMs: 15_000,
    });
    const lists = api.requests.filter((r) => !r.watch && r.path.startsWith('/api/v1/services'));
    expect(lists.length).toBeGreaterThanOrEqual(2);
    expect(
      informer
        .list()
        .map((s) => s.metadata?.name)
        .sort(),
    ).toEqual(['a', 'new']);
  });

  it('answers an expired watch with HTTP 410 and a Status when asked to', async () => {
    const api = await startApiServer({ expiredWatchAs: 'status' });
    servers.push(api);
    api.apply(fixtures.service('default', 'a'));
    api.faults.forgetHistory();
    const response = await fetch(`${api.url}/api/v1/services?watch=true&resourceVersion=1`);
    expect(response.status).toBe(410);
    expect(await response.json()).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
  });

  it('serves EndpointSlices with label selectors, and a later informer sees the same state', async () => {
    const api = await startApiServer({
      objects: [
        fixtures.endpointSlice('default', 'web', 'web-abc', [{ addresses: ['10.1.0.1'] }]),
        fixtures.endpointSlice('default', 'db', 'db-abc', [{ addresses: ['10.1.0.2'] }]),
      ],
    });
    servers.push(api);
    const kc = new KubeConfig();
    kc.loadFromString(api.kubeconfigYaml());
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const names = async () => {
      const informer = makeInformer<V1EndpointSlice>(kc, '/apis/discovery.k8s.io/v1/endpointslices', () =>
        discovery.listEndpointSliceForAllNamespaces(),
      );
      stops.push(() => informer.stop());
      await informer.start();
      return informer;
    };
    const first = await names();
    api.apply(fixtures.endpointSlice('default', 'web', 'web-def', [{ addresses: ['10.1.0.3'] }]));
    await waitFor(() => first.list().length === 3, { what: 'the first informer to see the new slice' });
    const second = await names();
    expect(
      second
        .list()
        .map((s) => s.metadata?.name)
        .sort(),
    ).toEqual(
      first
        .list()
        .map((s) => s.metadata?.name)
        .sort(),
    );
    const selected = await discovery.listNamespacedEndpointSlice({
      namespace: 'default',
      labelSelector: 'kubernetes.io/service-name=web',
    });
    expect(selected.items.map((s) => s.metadata?.name).sort()).toEqual(['web-abc', 'web-def']);
  });

  it('pages lists with limit and continue, every page with the first page version', async () => {
    const api = await startApiServer({
      objects: Array.from({ length: 5 }, (_, i) =>
        fixtures.service('default', `s${i}`, { clusterIPs: [`10.96.0.${i + 1}`] }),
      ),
    });
    servers.push(api);
    const page = async (query: string) =>
      (await (await fetch(`${api.url}/api/v1/services?${query}`)).json()) as {
        metadata: { resourceVersion: string; continue?: string };
        items: V1Service[];
      };
    const first = await page('limit=2');
    expect(first.items.map((s) => s.metadata?.name)).toEqual(['s0', 's1']);
    api.apply(fixtures.service('default', 'late', { clusterIPs: ['10.96.0.99'] }));
    const second = await page(`limit=2&continue=${first.metadata.continue}`);
    expect(second.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
    expect(second.items.map((s) => s.metadata?.name)).toEqual(['s2', 's3']);
    // Not an etcd snapshot: a later page sees an object created after the first (documented).
    const third = await page(`limit=2&continue=${second.metadata.continue}`);
    expect(third.items.map((s) => s.metadata?.name)).toEqual(['s4', 'late']);
    expect(third.metadata.continue).toBeUndefined();
    expect((await fetch(`${api.url}/api/v1/services?continue=garbage`)).status).toBe(400);
  });

  it('sends bookmarks when allowed and ends the stream at timeoutSeconds', async () => {
    const api = await startApiServer({ objects: [fixtures.service('default', 'a')], bookmarkIntervalMs: 100 });
    servers.push(api);
    const started = Date.now();
    const response = await fetch(`${api.url}/api/v1/services?watch=true&allowWatchBookmarks=true&timeoutSeconds=1`);
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; object: V1Service });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(lines[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'a' } } });
    const bookmarks = lines.filter((l) => l.type === 'BOOKMARK');
    expect(bookmarks.length).toBeGreaterThanOrEqual(5);
    expect(bookmarks[0]?.object.metadata?.resourceVersion).toBe(String(api.store.resourceVersion));
    expect(api.openWatches()).toBe(0);
  });

  it('answers 500 on demand, then serves again', async () => {
    const api = await serverWith(['default', 'a']);
    api.faults.failRequests(500, 1);
    expect((await fetch(`${api.url}/api/v1/services`)).status).toBe(500);
    expect((await fetch(`${api.url}/api/v1/services`)).status).toBe(200);
  });

  it('stops and starts again on the same port', async () => {
    const api = await serverWith(['default', 'a']);
    await api.faults.stop();
    await expect(fetch(`${api.url}/api/v1/services`)).rejects.toThrow();
    await api.faults.restart();
    expect((await fetch(`${api.url}/api/v1/services`)).status).toBe(200);
  });
});
