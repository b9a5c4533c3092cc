import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtures, startApiServer, type TestApiServer, waitFor } from '../src/index.js';

const servers: TestApiServer[] = [];
const requests: http.ClientRequest[] = [];
afterEach(async () => {
  for (const r of requests.splice(0)) r.destroy();
  for (const s of servers.splice(0)) await s.close();
});

/** A Service carrying ~`kib` KiB of annotation, so a few hundred fill any socket buffer. */
const bulky = (i: number, kib = 32) => {
  const s = fixtures.service('bulk', `svc-${i}`, { clusterIPs: [`10.96.${i >> 8}.${i & 255}`] });
  s.metadata = { ...s.metadata, annotations: { padding: 'x'.repeat(kib * 1024) } };
  return s;
};

/** Endpoints carrying ~32 KiB of annotation: live traffic for a second watch, of another kind. */
const bulkyEndpoints = (i: number) => {
  const e = fixtures.endpoints('bulk', `ep-${i}`, [{ ip: `10.244.${i >> 8}.${i & 255}` }]);
  e.metadata = { ...e.metadata, annotations: { padding: 'x'.repeat(32 * 1024) } };
  return e;
};

/** A raw watch whose reading the test controls: paused until `resume`. */
function rawWatch(api: TestApiServer, resourceVersion: number, resource = 'services') {
  const lines: string[] = [];
  let rest = '';
  let response: http.IncomingMessage | undefined;
  const ended = new Promise<'end' | 'error'>((resolve) => {
    const req = http.get(`${api.url}/api/v1/${resource}?watch=true&resourceVersion=${resourceVersion}`, (res) => {
      response = res;
      res.pause();
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const parts = (rest + chunk).split('\n');
        rest = parts.pop() ?? '';
        lines.push(...parts);
      });
      res.on('end', () => resolve('end'));
      res.on('error', () => resolve('error'));
      res.on('aborted', () => resolve('error'));
    });
    req.on('error', () => resolve('error'));
    requests.push(req);
  });
  return {
    lines,
    ended,
    opened: () => response !== undefined,
    resume: () => response?.resume(),
  };
}

describe('testkit API server with a slow watcher, as kube-apiserver treats one', () => {
  it('closes a watch whose client stops reading, cleanly, after sending events in order', async () => {
    const api = await startApiServer({ watchChannelSize: 10, watchDispatchTimeoutMs: 50 });
    servers.push(api);
    const watch = rawWatch(api, api.store.resourceVersion);
    await waitFor(() => watch.opened() && api.openWatches() === 1, { what: 'the watch to open' });
    for (let i = 0; i < 400; i++) {
      api.apply(bulky(i));
      // A turn of the event loop now and then, so the server writes as a real one would between events.
      if (i % 20 === 0) await new Promise((r) => setImmediate(r));
    }
    await waitFor(() => api.slowWatchersClosed() === 1, { what: 'the slow watcher closed' });
    expect(api.openWatches()).toBe(0);
    watch.resume();
    // The end is a clean one (as a watch timeout), so a client resumes from its last version.
    expect(await watch.ended).toBe('end');
    const versions = watch.lines.map((l) => Number(JSON.parse(l).object.metadata.resourceVersion));
    expect(versions.length).toBeGreaterThan(0);
    expect(versions.length).toBeLessThan(400);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
  });

  it('sends a replay far longer than the channel at the reader’s pace, without closing it', async () => {
    const api = await startApiServer({ watchChannelSize: 10, watchDispatchTimeoutMs: 50 });
    servers.push(api);
    const from = api.store.resourceVersion;
    for (let i = 0; i < 300; i++) api.apply(bulky(i));
    const watch = rawWatch(api, from);
    await waitFor(() => watch.opened(), { what: 'the watch to open' });
    // A control: a second stalled reader, of live Endpoints events, is closed once its channel has
    // stayed full past the dispatch timeout. When it is, that timeout has passed for the replay
    // too, and the replay's reader, as stalled, must still be open.
    const control = rawWatch(api, api.store.resourceVersion, 'endpoints');
    await waitFor(() => control.opened() && api.openWatches() === 2, { what: 'the control watch to open' });
    for (let i = 0; i < 2000 && api.slowWatchersClosed() === 0; i++) {
      api.apply(bulkyEndpoints(i));
      await new Promise((r) => setImmediate(r));
    }
    await waitFor(() => api.slowWatchersClosed() === 1, {
      what: 'the stalled live watcher closed',
      seen: () => ({ closed: api.slowWatchersClosed(), open: api.openWatches() }),
    });
    expect(api.openWatches()).toBe(1);
    watch.resume();
    await waitFor(() => watch.lines.length === 300, { what: 'the whole replay' });
    // Only the control was closed.
    expect(api.slowWatchersClosed()).toBe(1);
    expect(api.openWatches()).toBe(1);
    api.apply(bulky(1000, 1));
    await waitFor(() => watch.lines.length === 301, { what: 'a live event after the replay' });
  });
});
