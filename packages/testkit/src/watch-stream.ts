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
  onClose: () => void;
}

/**
 * One open watch: a chunked stream of newline-delimited `{"type","object"}` events, as
 * kube-apiserver sends them, with bookmarks when allowed and an end at `timeoutSeconds`.
 */
export function streamWatch(res: http.ServerResponse, options: WatchStreamOptions): void {
  const { store, kind, match, params } = options;
  res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
  res.flushHeaders();
  const writeEvent = (type: string, object: unknown) => {
    if (!res.writableEnded && !res.destroyed) res.write(`${JSON.stringify({ type, object })}\n`);
  };
  for (const e of options.backlog) writeEvent(e.type, e.object);
  const unsubscribe = store.subscribe((e: StoredEvent) => {
    if (e.kind === kind && match(e.object)) writeEvent(e.type, e.object);
  });
  const timers: NodeJS.Timeout[] = [];
  if (params.get('allowWatchBookmarks') === 'true') {
    const bookmark = () =>
      writeEvent('BOOKMARK', {
        kind: kind.kind,
        apiVersion: apiVersionOf(kind),
        metadata: { resourceVersion: String(store.resourceVersion) },
      });
    timers.push(setInterval(bookmark, options.bookmarkIntervalMs));
  }
  const timeoutSeconds = Number(params.get('timeoutSeconds') ?? '0');
  if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000));
  const cleanup = () => {
    unsubscribe();
    for (const t of timers) clearTimeout(t);
    options.onClose();
  };
  res.on('close', cleanup);
  res.on('finish', cleanup);
}
