import type { Logger } from '@cluster-dns/runtime';
import { objectHash, type StateFingerprint } from '@cluster-dns/wire';
import type { KubernetesObject } from '@kubernetes/client-node';
import { type ApiClient, ApiRequestError, type WatchEventType } from './api-client.js';

/** Where the objects a reflector sees go. */
export interface ObjectSink {
  upsert(object: KubernetesObject): void;
  /** `resourceVersion`: the deletion's (a watch's DELETED event), or the list's that no longer had it. */
  remove(namespace: string, name: string, resourceVersion: string): void;
}

export interface ReflectorHooks {
  /** A watch is open: the resource is current again (after the first list, or a resumed watch). */
  onWatching(): void;
  /** The first full list has gone to the sink. */
  onSynced(objects: number): void;
  onError(error: unknown): void;
  /** A list began again from scratch: at start, after 410 Gone, or after a failed watch start. */
  onRelist(reason: 'start' | 'expired' | 'error'): void;
  onEvent(type: 'add' | 'update' | 'delete', durationNs: bigint): void;
  /**
   * Everything up to `resourceVersion` has gone to the sink (a list's end when `listed`, or any
   * event or bookmark of the watch), and the objects now fingerprint as given (zone-position.ts).
   */
  onProgress?(resourceVersion: string, fingerprint: StateFingerprint, listed: boolean): void;
}

export interface ReflectorOptions {
  api: ApiClient;
  path: string;
  sink: ObjectSink;
  log: Logger;
  hooks: ReflectorHooks;
  pageSize: number;
  /** Backoff between failed attempts: base, doubling to max. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Keys (namespace/name) the sink holds already: the first list removes those it does not see. */
  initialKnown?: readonly string[];
  /**
   * A resource DNS can start without (what is lost, for the log): when the first list is refused
   * with 404 (the API does not serve it) or 403 (RBAC does not grant it), it counts as synced with
   * nothing, and is tried again on the backoff until the API serves it.
   */
  optional?: string | undefined;
  /** List by streaming (WatchList) first; default true. Paged lists once the API refuses it. */
  streamLists?: boolean;
}

export interface Reflector {
  /** Starts listing and watching in the background. */
  start(): void;
  readonly synced: boolean;
  /** Objects seen, by namespace/name. */
  readonly size: number;
  /** Stops at once: the open request is aborted and no retry is scheduled. */
  stop(): void;
}

/** The longest Retry-After obeyed as given; a longer one (a misconfigured proxy's) is cut to this. */
const RETRY_AFTER_MAX_MS = 60_000;

/** The annotation of the bookmark that ends a streaming list's initial events (KEP-3157). */
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

const keyOf = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * client-go's reflector, on client-node's public pieces: list by streaming (WatchList, one watch
 * that sends the state first) or, where the API server refuses that, in pages (applying each
 * object as it comes, so a relist never holds two copies of the cluster and never empties the
 * store), then watch from the list's resourceVersion; re-watch from the last version after a clean end or an
 * error, relist after 410 Gone. Failures back off (capped) and the last known state stays.
 * Unchanged objects (same resourceVersion) are not re-applied on a relist.
 */
export function createReflector(options: ReflectorOptions): Reflector {
  const { api, path, sink, hooks } = options;
  const log = options.log;
  /** Every object seen, with its resourceVersion: what a relist compares against. */
  const known = new Map<string, string>((options.initialKnown ?? []).map((key) => [key, '']));
  let version = '';
  let synced = false;
  let stopped = false;
  let failures = 0;
  let stopWatch: (() => void) | undefined;
  let wake: (() => void) | undefined;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  /** The objects known, as a count and a sum of each one's hash of key and resourceVersion. */
  let count = known.size;
  let sum = 0;
  for (const key of known.keys()) sum = (sum + objectHash(key, '')) >>> 0;
  const progressed = (listed: boolean) => hooks.onProgress?.(version, { count, sum }, listed);

  const apply = (object: KubernetesObject, type: 'add' | 'update') => {
    const t0 = process.hrtime.bigint();
    sink.upsert(object);
    const key = keyOf(object);
    const before = known.get(key);
    const now = object.metadata?.resourceVersion ?? '';
    if (before === undefined) count++;
    else sum = (sum - objectHash(key, before)) >>> 0;
    sum = (sum + objectHash(key, now)) >>> 0;
    known.set(key, now);
    hooks.onEvent(type, process.hrtime.bigint() - t0);
  };
  const remove = (key: string, resourceVersion: string) => {
    const t0 = process.hrtime.bigint();
    const slash = key.indexOf('/');
    sink.remove(key.slice(0, slash), key.slice(slash + 1), resourceVersion);
    const before = known.get(key);
    if (before !== undefined) {
      count--;
      sum = (sum - objectHash(key, before)) >>> 0;
    }
    known.delete(key);
    hooks.onEvent('delete', process.hrtime.bigint() - t0);
  };

  /** The objects of one list as they come, applied only when changed; then what it did not see goes. */
  const listing = () => {
    const seen = new Set<string>();
    return {
      item: (object: KubernetesObject) => {
        const key = keyOf(object);
        seen.add(key);
        const before = known.get(key);
        if (before === undefined) apply(object, 'add');
        else if (before !== object.metadata?.resourceVersion) apply(object, 'update');
      },
      end: (listVersion: string) => {
        for (const key of [...known.keys()]) if (!seen.has(key)) remove(key, listVersion);
      },
    };
  };

  const list = async () => {
    // Each object is applied as the page's bytes bring it (listPage's onItem), so a relist never
    // holds a whole page, let alone two copies of the cluster, and never empties the store.
    const { item: onItem, end } = listing();
    let page = await api.listPage(path, { limit: options.pageSize }, onItem);
    const listVersion = page.resourceVersion;
    while (!stopped && page.continueToken)
      page = await api.listPage(path, { limit: options.pageSize, continueToken: page.continueToken }, onItem);
    if (stopped) return;
    end(listVersion);
    version = listVersion;
    progressed(true);
  };

  /**
   * One watch until it ends; resolves with why it ended. With `listed`, it is a streaming list
   * (WatchList): the state comes first as ADDED events, applied as a list's items are, and the
   * bookmark annotated `k8s.io/initial-events-end` ends the list (`listed` is called, the rest of
   * the stream is the watch). One request instead of a list and a watch, the state never held
   * whole, and no list served from etcd.
   */
  const watch = (listed?: () => void) =>
    new Promise<{ error: unknown; expired: boolean; listing: boolean }>((resolve) => {
      let expired = false;
      let ended = false;
      let initial = listed ? listing() : undefined;
      const onEvent = (type: WatchEventType, object: KubernetesObject) => {
        if (type === 'ERROR') {
          expired = (object as { code?: number }).code === 410;
          return;
        }
        if (initial) {
          if (type === 'ADDED') initial.item(object);
          else if (type === 'BOOKMARK' && object.metadata?.annotations?.[INITIAL_EVENTS_END] === 'true') {
            initial.end(object.metadata?.resourceVersion ?? '');
            initial = undefined;
            version = object.metadata?.resourceVersion || version;
            progressed(true);
            failures = 0;
            listed?.();
            hooks.onWatching();
          }
          return;
        }
        if (type === 'ADDED' || type === 'MODIFIED') apply(object, known.has(keyOf(object)) ? 'update' : 'add');
        else if (type === 'DELETED') {
          if (known.has(keyOf(object))) remove(keyOf(object), object.metadata?.resourceVersion ?? '');
        }
        version = object.metadata?.resourceVersion || version;
        failures = 0;
        progressed(false);
      };
      const onDone = (error: unknown) => {
        ended = true;
        stopWatch = undefined;
        const gone = error instanceof ApiRequestError && error.expired;
        resolve({
          error: (error as Error)?.name === 'TimeoutError' ? undefined : error,
          expired: expired || gone,
          listing: initial !== undefined,
        });
      };
      const params = listed ? { resourceVersion: '', sendInitialEvents: true } : { resourceVersion: version };
      api.watch(path, params, onEvent, onDone).then(
        (stop) => {
          // Resolved after a refused request too, once onDone has run.
          if (stopped) stop();
          else if (!ended) {
            stopWatch = stop;
            if (!listed) hooks.onWatching();
          }
        },
        (error: unknown) => resolve({ error, expired: false, listing: initial !== undefined }),
      );
    });

  const run = async () => {
    let relist: 'start' | 'expired' | 'error' | undefined = 'start';
    let streamLists = options.streamLists ?? true;
    /** The relist under way was counted already (a streaming list refused, now paged). */
    let counted = false;
    const listed = () => {
      relist = undefined;
      if (!synced) {
        log.info('synced', { path, objects: known.size });
        hooks.onSynced(known.size);
      }
      synced = true;
    };
    while (!stopped) {
      try {
        let ended: Awaited<ReturnType<typeof watch>>;
        if (relist && streamLists) {
          hooks.onRelist(relist);
          ended = await watch(listed);
          if (stopped) return;
          // An API server before WatchList refuses its parameters (400 or 422): paged lists, from now on.
          const status = ended.error instanceof ApiRequestError ? ended.error.status : undefined;
          if (ended.listing && (status === 400 || status === 422)) {
            log.info('the API server does not stream lists (WatchList); listing in pages', { path, status });
            streamLists = false;
            counted = true;
            continue;
          }
        } else {
          if (relist) {
            if (!counted) hooks.onRelist(relist);
            counted = false;
            await list();
            if (stopped) return;
            listed();
          }
          ended = await watch();
        }
        if (stopped) return;
        if (ended.expired) {
          log.info('watch expired (410 Gone); listing again', { path });
          relist = 'expired';
          continue;
        }
        if (!ended.error) continue;
        throw ended.error;
      } catch (error) {
        if (stopped) return;
        failures++;
        const unserved = error instanceof ApiRequestError && (error.status === 404 || error.status === 403);
        if (options.optional && unserved && !synced) {
          log.warn('not served by the API; starting without it', { path, err: error, lost: options.optional });
          synced = true;
          hooks.onSynced(0);
        }
        if (error instanceof ApiRequestError && error.expired) relist = 'expired';
        else if (relist === undefined && version === '') relist = 'error';
        hooks.onError(error);
        // The server says when to come back (a 429 while its watch cache warms, KEP-4568): that
        // long, no sooner, and no later either: our own doubling would leave DNS behind by up to
        // retryMaxMs after the API is back. It is the server's load, not our failure to count.
        const asked = error instanceof ApiRequestError ? error.retryAfterMs : undefined;
        if (asked !== undefined) {
          failures--;
          const retryInMs = Math.min(Math.max(asked, options.retryBaseMs), RETRY_AFTER_MAX_MS);
          log.info('the API server asks to retry later; serving the last known state', {
            path,
            status: (error as ApiRequestError).status,
            synced,
            retryInMs,
          });
          await pause(retryInMs);
          continue;
        }
        const retryInMs = Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** Math.min(failures - 1, 16));
        log.warn('watch failed; serving the last known state', { path, err: error, synced, retryInMs });
        await pause(retryInMs);
      }
    }
  };

  return {
    start: () => {
      void run();
    },
    get synced() {
      return synced;
    },
    get size() {
      return known.size;
    },
    stop: () => {
      stopped = true;
      stopWatch?.();
      wake?.();
    },
  };
}
