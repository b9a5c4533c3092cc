import { ClusterDnsError } from '@cluster-dns/wire';
import { HttpMethod, type KubeConfig, type KubernetesObject, RequestContext, Watch } from '@kubernetes/client-node';
import { fetch } from 'undici';
import { type ListEnd, ListStream } from './list-stream.js';

/** A list or watch request the API server refused or that failed on the way. */
export class ApiRequestError extends ClusterDnsError {
  constructor(
    readonly path: string,
    readonly status: number | undefined,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super('API_REQUEST_FAILED', `${path}: ${message}`, {
      ...options,
      hint:
        status === 401 || status === 403
          ? 'check the ServiceAccount token and that the ClusterRole grants list and watch on this resource'
          : undefined,
    });
  }

  /** 410 Gone: the resourceVersion or continue token is too old; list again from now. */
  get expired(): boolean {
    return this.status === 410;
  }
}

export type ListPage = ListEnd;

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface ApiClient {
  /**
   * One page of a list: each item goes to `onItem` as a raw object (no model deserialization: it
   * costs time and memory) as soon as its bytes are in, and the page's own fields come at the end.
   */
  listPage(
    path: string,
    params: { limit: number; continueToken?: string },
    onItem: (object: KubernetesObject) => void,
  ): Promise<ListPage>;
  /**
   * Watches from `resourceVersion`; `onEvent` gets each event, `onDone` the end of the stream
   * (undefined for a clean end). Returns a function that stops the watch.
   */
  watch(
    path: string,
    resourceVersion: string,
    onEvent: (type: WatchEventType, object: KubernetesObject) => void,
    onDone: (error: unknown) => void,
  ): Promise<() => void>;
}

/**
 * The Kubernetes API through client-node's public pieces: its kubeconfig authentication for lists
 * (`applySecurityAuthentication` on a RequestContext, then undici's fetch with the dispatcher it
 * sets up), and its `Watch` for watches.
 */
export function createApiClient(kubeConfig: KubeConfig): ApiClient {
  const watcher = new Watch(kubeConfig);
  const server = () => {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new ApiRequestError('(kubeconfig)', undefined, 'no current cluster');
    return cluster.server.replace(/\/$/, '');
  };
  return {
    async listPage(path, params, onItem) {
      const url = new URL(server() + path);
      url.searchParams.set('limit', String(params.limit));
      if (params.continueToken) url.searchParams.set('continue', params.continueToken);
      const context = new RequestContext(url.toString(), HttpMethod.GET);
      await kubeConfig.applySecurityAuthentication(context);
      let response: Awaited<ReturnType<typeof fetch>>;
      try {
        response = await fetch(url, {
          headers: { ...context.getHeaders(), accept: 'application/json' },
          dispatcher: context.getDispatcher() as never,
        });
      } catch (error) {
        throw new ApiRequestError(path, undefined, `request failed: ${(error as Error).message}`, { cause: error });
      }
      if (response.status !== 200) {
        const text = await response.text();
        let message = `HTTP ${response.status}`;
        try {
          message += `: ${(JSON.parse(text) as { message?: string }).message ?? ''}`;
        } catch {
          // Not a Status object (a proxy's error page, say): the HTTP status says enough.
        }
        throw new ApiRequestError(path, response.status, message);
      }
      const stream = new ListStream((json) => onItem(JSON.parse(json) as KubernetesObject));
      try {
        if (response.body) for await (const chunk of response.body) stream.push(chunk);
        return stream.end();
      } catch (error) {
        throw new ApiRequestError(path, 200, `reading the list failed: ${(error as Error).message}`, { cause: error });
      }
    },
    async watch(path, resourceVersion, onEvent, onDone) {
      const controller = await watcher.watch(
        path,
        { resourceVersion, allowWatchBookmarks: true },
        (type: string, object: KubernetesObject) => onEvent(type as WatchEventType, object),
        onDone,
      );
      return () => controller.abort();
    },
  };
}
