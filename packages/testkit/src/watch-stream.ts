import type http from 'node:http';
import type { ObjectStore, StoredEvent } from './object-store.js';
import { apiVersionOf, type KubeObject, type ResourceKind } from './resources.js';

export interface WatchStreamOptions {
  store: ObjectStore;
  kind: ResourceKind;
  match: (object: KubeObject) => boolean;
  /** Events owed before the live ones: the current state, or history after the asked version. */
  backlog: ReadonlyArray<{ type: string; object: KubeObject }>;
  params: URLSearchParams;
  bookmarkIntervalMs: number;
  /** Live events a watcher may have waiting (kube-apiserver's cacheWatcher input channel). */
  channelSize: number;
  /** How long a full channel may stay full before the watcher is closed. */
  dispatchTimeoutMs: number;
  /** Told when a watch is closed for falling behind. */
  onSlowWatcher: () => void;
  onClose: () => void;
}

/** Bytes handed to the socket before the stream waits for 'drain': about a socket's own buffers. */
const SOCKET_HIGH_WATER = 256 * 1024;

/**
 * One open watch: a chunked stream of newline-delimited `{"type","object"}` events, as
 * kube-apiserver sends them, with bookmarks when allowed and an end at `timeoutSeconds`.
 *
 * Written at the client's pace, as kube-apiserver's cacher does: the replay (current state, or
 * history after the asked version) goes out as fast as the client reads it, however long; live
 * events wait in a channel of `channelSize`, and a watcher whose channel stays full for
 * `dispatchTimeoutMs` is closed ("forcing watcher close due to unresponsiveness"), the response
 * ending cleanly, as when the watch times out. The client then resumes from its last version
 * (or relists after 410). So a slow reader never grows this server without bound.
 */
export function streamWatch(res: http.ServerResponse, options: WatchStreamOptions): void {
  const { store, kind, match, params } = options;
  res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
  res.flushHeaders();
  let replayed = 0;
  const live: Array<{ type: string; object: unknown }> = [];
  let fullSince: NodeJS.Timeout | undefined;
  let done = false;

  const pump = () => {
    while (!done && !res.writableEnded && res.writableLength < SOCKET_HIGH_WATER) {
      let next: { type: string; object: unknown } | undefined;
      if (replayed < options.backlog.length) next = options.backlog[replayed++];
      else next = live.shift();
      if (!next) break;
      res.write(`${JSON.stringify(next)}\n`);
    }
    if (fullSince && live.length <= options.channelSize) {
      clearTimeout(fullSince);
      fullSince = undefined;
    }
  };
  const send = (type: string, object: unknown) => {
    if (done || res.writableEnded) return;
    live.push({ type, object });
    pump();
    if (live.length > options.channelSize && !fullSince) {
      fullSince = setTimeout(() => {
        fullSince = undefined;
        if (live.length <= options.channelSize) return;
        options.onSlowWatcher();
        cleanup();
        res.end();
      }, options.dispatchTimeoutMs);
    }
  };
  res.on('drain', pump);
  pump();

  const unsubscribe = store.subscribe((e: StoredEvent) => {
    if (e.kind === kind && match(e.object)) send(e.type, e.object);
  });
  const timers: NodeJS.Timeout[] = [];
  if (params.get('allowWatchBookmarks') === 'true') {
    const bookmark = () =>
      send('BOOKMARK', {
        kind: kind.kind,
        apiVersion: apiVersionOf(kind),
        metadata: { resourceVersion: String(store.resourceVersion) },
      });
    timers.push(setInterval(bookmark, options.bookmarkIntervalMs));
  }
  const timeoutSeconds = Number(params.get('timeoutSeconds') ?? '0');
  if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000));
  const cleanup = () => {
    if (done) return;
    done = true;
    live.length = 0;
    clearTimeout(fullSince);
    unsubscribe();
    for (const t of timers) clearTimeout(t);
    options.onClose();
  };
  res.on('close', cleanup);
  res.on('finish', cleanup);
}
