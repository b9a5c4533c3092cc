import { writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { discoveryDocument } from './discovery.js';
import { ObjectStore } from './object-store.js';
import { mergeKeyAt, openApiV3, unknownFields } from './openapi.js';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch } from './patch.js';
import { decodeKubeProtobuf, ProtobufError } from './protobuf.js';
import {
  apiVersionOf,
  type KubeObject,
  kindOfObject,
  parseResourcePath,
  RESOURCE_KINDS,
  type ResourcePath,
} from './resources.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { toTable, wantsTable } from './tables.js';
import { streamWatch } from './watch-stream.js';

export interface ApiServerOptions {
  host?: string;
  /** 0 picks a free port; restart() keeps the one it got. */
  port?: number;
  objects?: readonly KubeObject[];
  historyLimit?: number;
  /** How often a watch that allows bookmarks gets one. */
  bookmarkIntervalMs?: number;
  /** How a too-old watch is refused: an ERROR event with a 410 Status (as kube-apiserver does) or HTTP 410. */
  expiredWatchAs?: 'event' | 'status';
  /**
   * Live events a watch may have waiting for its client (default 100, kube-apiserver's cacheWatcher
   * channel for large resources); one whose channel stays full `watchDispatchTimeoutMs` (default
   * 100, the cacher's dispatch budget) is closed.
   */
  watchChannelSize?: number;
  watchDispatchTimeoutMs?: number;
  /**
   * Resources (plurals) this server answers 404 for, as an older API server does for a kind it does
   * not have yet (ServiceCIDRs before Kubernetes 1.33). Discovery still lists them: our clients do
   * not read it.
   */
  unserved?: readonly string[];
  /**
   * Streaming lists (WatchList, KEP-3157: a watch with `sendInitialEvents=true`, GA in 1.34): served
   * by default; false plays an API server before them, which refuses `resourceVersionMatch` on a
   * watch (400), as client-go's fallback to paged lists expects.
   */
  watchList?: boolean;
}

export interface RequestRecord {
  method: string;
  path: string;
  watch: boolean;
  status: number;
  /** When it was answered (performance.now()). */
  atMs: number;
}

/** A Kubernetes API server for tests and the demo: list, get, watch, create, replace, delete. */
export interface TestApiServer {
  readonly url: string;
  readonly port: number;
  readonly store: ObjectStore;
  /** Every request answered, in order, for tests that assert on what the client asked. */
  readonly requests: RequestRecord[];
  apply(object: KubeObject): KubeObject;
  remove(kind: string, namespace: string | undefined, name: string): boolean;
  kubeconfigYaml(): string;
  writeKubeconfig(path: string): Promise<void>;
  openWatches(): number;
  /** Watches closed because their client fell too far behind. */
  slowWatchersClosed(): number;
  /** Octets written to clients so far (headers, chunking and bodies): what a list or a watch costs the API. */
  bytesSent(): number;
  faults: ApiFaults;
  close(): Promise<void>;
}

export interface ApiFaults {
  /**
   * Ends every open watch stream: cleanly by default (as the API server's own timeout does), or
   * `abrupt` with a reset mid-stream (as a crashed API server or a load balancer does).
   */
  dropWatches(options?: { abrupt?: boolean }): void;
  /** Forgets the event history: the next watch from an old version gets 410 Gone. */
  forgetHistory(): void;
  /**
   * Answers the next `count` list/watch requests with this HTTP status and a Status object; with
   * `retryAfterSeconds`, a Retry-After header too, as kube-apiserver's 429 while its watch cache
   * (re)initializes (KEP-4568) or under API Priority and Fairness.
   */
  failRequests(status: number, count: number, options?: { retryAfterSeconds?: number }): void;
  /**
   * Cuts the next `count` list responses: the status and the first half of the body, then the
   * connection is reset (as a load balancer or a crashing API server does mid-transfer).
   */
  cutLists(count: number): void;
  /** Holds each request this long before answering, until cleared with 0. */
  delayRequests(ms: number): void;
  /** Closes the listening socket and every connection; restart() listens again on the same port. */
  stop(): Promise<void>;
  restart(): Promise<void>;
}

const PROTOBUF = 'application/vnd.kubernetes.protobuf';
const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
];

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

export async function startApiServer(options: ApiServerOptions = {}): Promise<TestApiServer> {
  const host = options.host ?? '127.0.0.1';
  const store = new ObjectStore(options.historyLimit);
  for (const object of options.objects ?? []) store.apply(object);
  const requests: RequestRecord[] = [];
  const watches = new Set<http.ServerResponse>();
  const sockets = new Set<import('node:net').Socket>();
  let failures: { status: number; count: number; retryAfterSeconds: number | undefined } | undefined;
  let slowWatchers = 0;
  let delayMs = 0;
  let listsToCut = 0;

  const server = http.createServer((req, res) => {
    const finish = () => handle(req, res);
    if (delayMs > 0) setTimeout(finish, delayMs);
    else finish();
  });
  let closedBytes = 0;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      closedBytes += socket.bytesWritten;
      sockets.delete(socket);
    });
  });

  /** Logs a request as answered with `status` (`requests`, for tests to read). */
  const record = (req: http.IncomingMessage, status: number, watch: boolean) =>
    requests.push({ method: req.method ?? 'GET', path: req.url ?? '', watch, status, atMs: performance.now() });

  const send = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    code: number,
    body: unknown,
    watch = false,
    headers: Record<string, string> = {},
  ) => {
    record(req, code, watch);
    res.writeHead(code, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

  function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://testkit');
    const discovery = discoveryDocument(url.pathname) ?? openApiV3(url.pathname);
    if (discovery !== undefined) return send(req, res, 200, discovery);
    const parsed = parseResourcePath(url.pathname);
    const path = parsed && options.unserved?.includes(parsed.kind.plural) ? undefined : parsed;
    if (!path)
      return send(
        req,
        res,
        404,
        status(404, 'NotFound', `the server could not find the requested resource ${url.pathname}`),
      );
    if (failures && failures.count > 0) {
      failures.count--;
      const after = failures.retryAfterSeconds;
      const body =
        failures.status === 429
          ? status(429, 'TooManyRequests', 'storage is (re)initializing')
          : status(failures.status, 'InternalError', 'injected failure');
      return send(req, res, failures.status, body, false, after === undefined ? {} : { 'retry-after': String(after) });
    }
    const method = req.method ?? 'GET';
    if (method === 'GET') {
      const isWatch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
      if (isWatch) return watch(req, res, path, url.searchParams);
      return getOrList(req, res, path, url.searchParams);
    }
    if (method === 'POST' || method === 'PUT') return write(req, res, path, url.searchParams);
    if (method === 'PATCH' && path.name) return patch(req, res, path, url.searchParams);
    if (method === 'DELETE' && path.name) {
      const ok = store.remove(path.kind, path.namespace, path.name);
      return send(
        req,
        res,
        ok ? 200 : 404,
        ok
          ? { kind: 'Status', apiVersion: 'v1', status: 'Success' }
          : status(404, 'NotFound', `${path.kind.plural} "${path.name}" not found`),
      );
    }
    return send(req, res, 405, status(405, 'MethodNotAllowed', `${method} is not supported here`));
  }

  function matcher(path: ResourcePath, params: URLSearchParams) {
    const labels = parseLabelSelector(params.get('labelSelector'));
    const fields = parseFieldSelector(params.get('fieldSelector'));
    return (o: KubeObject) =>
      (path.namespace === undefined || o.metadata.namespace === path.namespace) && labels(o) && fields(o);
  }

  function getOrList(req: http.IncomingMessage, res: http.ServerResponse, path: ResourcePath, params: URLSearchParams) {
    if (path.name) {
      const ns = path.kind.namespaced ? path.namespace : undefined;
      const object = store.get(path.kind, ns, path.name);
      if (!object) return send(req, res, 404, status(404, 'NotFound', `${path.kind.plural} "${path.name}" not found`));
      if (wantsTable(req.headers.accept))
        return send(
          req,
          res,
          200,
          toTable(path.kind, [object], String(store.resourceVersion), params.get('includeObject')),
        );
      return send(req, res, 200, object);
    }
    let match: (o: KubeObject) => boolean;
    try {
      match = matcher(path, params);
    } catch (error) {
      return send(req, res, 400, status(400, 'BadRequest', (error as Error).message));
    }
    // Pages (`limit`, `continue`) as kube-apiserver gives them: every page carries the first page's
    // resourceVersion. Unlike etcd this is not a snapshot: later pages see later changes.
    const all = store.list(path.kind).filter(match);
    const limit = Number(params.get('limit') ?? '0');
    const token = params.get('continue');
    let from = 0;
    let listVersion = String(store.resourceVersion);
    if (token) {
      try {
        ({ from, listVersion } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as {
          from: number;
          listVersion: string;
        });
      } catch {
        return send(req, res, 400, status(400, 'BadRequest', 'invalid continue token'));
      }
    }
    const to = limit > 0 ? Math.min(all.length, from + limit) : all.length;
    const next =
      to < all.length ? Buffer.from(JSON.stringify({ from: to, listVersion })).toString('base64url') : undefined;
    if (wantsTable(req.headers.accept)) {
      const table = toTable(path.kind, all.slice(from, to), listVersion, params.get('includeObject'));
      return send(req, res, 200, { ...table, metadata: { ...table.metadata, ...(next ? { continue: next } : {}) } });
    }
    const list = {
      kind: `${path.kind.kind}List`,
      apiVersion: apiVersionOf(path.kind),
      metadata: { resourceVersion: listVersion, ...(next ? { continue: next } : {}) },
      items: all.slice(from, to),
    };
    if (listsToCut > 0) {
      listsToCut--;
      record(req, 200, false);
      const text = JSON.stringify(list);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(text.slice(0, text.length >> 1), () => res.destroy());
      return;
    }
    return send(req, res, 200, list);
  }

  function watch(req: http.IncomingMessage, res: http.ServerResponse, path: ResourcePath, params: URLSearchParams) {
    let match: (o: KubeObject) => boolean;
    try {
      match = matcher(path, params);
    } catch (error) {
      return send(req, res, 400, status(400, 'BadRequest', (error as Error).message));
    }
    const fromText = params.get('resourceVersion') ?? '';
    const from = Number(fromText || '0');
    const backlog: Array<{ type: string; object: KubeObject }> = [];
    const initialEvents = params.get('sendInitialEvents');
    const versionMatch = params.get('resourceVersionMatch');
    if (versionMatch !== null && options.watchList === false)
      return send(req, res, 400, status(400, 'BadRequest', 'resourceVersionMatch is forbidden for watch'), true);
    if (initialEvents === 'true') {
      // kube-apiserver's validation of a streaming list, then the state as ADDED events and the
      // bookmark that ends them (its resourceVersion is the list's).
      if (params.get('allowWatchBookmarks') !== 'true' || versionMatch !== 'NotOlderThan')
        return send(
          req,
          res,
          422,
          status(
            422,
            'Invalid',
            'sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan',
          ),
          true,
        );
      for (const o of store.list(path.kind).filter(match)) backlog.push({ type: 'ADDED', object: o });
      backlog.push({
        type: 'BOOKMARK',
        object: {
          kind: path.kind.kind,
          apiVersion: apiVersionOf(path.kind),
          metadata: {
            name: '',
            resourceVersion: String(store.resourceVersion),
            annotations: { 'k8s.io/initial-events-end': 'true' },
          },
        },
      });
    } else if (versionMatch !== null) {
      return send(
        req,
        res,
        422,
        status(422, 'Invalid', 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'),
        true,
      );
    } else if (from === 0) {
      // "Any" version: the current state as ADDED events, then changes (as kube-apiserver does).
      for (const o of store.list(path.kind).filter(match)) backlog.push({ type: 'ADDED', object: o });
    } else {
      const events = store.eventsAfter(from);
      if (!events) {
        const gone = status(410, 'Expired', `too old resource version: ${from} (${store.oldestResumableVersion})`);
        if (options.expiredWatchAs === 'status') return send(req, res, 410, gone, true);
        record(req, 200, true);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: gone })}\n`);
        return;
      }
      for (const e of events) if (e.kind === path.kind && match(e.object)) backlog.push(e);
    }
    record(req, 200, true);
    watches.add(res);
    streamWatch(res, {
      store,
      kind: path.kind,
      match,
      backlog,
      params,
      bookmarkIntervalMs: options.bookmarkIntervalMs ?? 10_000,
      channelSize: options.watchChannelSize ?? 100,
      dispatchTimeoutMs: options.watchDispatchTimeoutMs ?? 100,
      onSlowWatcher: () => slowWatchers++,
      onClose: () => watches.delete(res),
    });
  }

  /**
   * kube-apiserver's field validation: `Strict` refuses a field the schema does not declare (400,
   * kube's wording), `Warn` (the server default) accepts it with a Warning header, `Ignore` says
   * nothing. Returns false when it answered the request.
   */
  function validateFields(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    kind: ResourcePath['kind'],
    object: unknown,
    params: URLSearchParams,
  ): boolean {
    const mode = params.get('fieldValidation') ?? 'Warn';
    if (mode === 'Ignore') return true;
    const unknown = unknownFields(kind, object);
    if (unknown.length === 0) return true;
    const messages = unknown.map((f) => `unknown field "${f.slice(1)}"`);
    if (mode === 'Strict') {
      send(req, res, 400, status(400, 'BadRequest', `strict decoding error: ${messages.join(', ')}`));
      return false;
    }
    res.setHeader('Warning', messages.map((m) => `299 - "${m}"`).join(', '));
    return true;
  }

  function readBytes(req: http.IncomingMessage): Promise<Buffer> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks)));
    });
  }
  const readBody = async (req: http.IncomingMessage) => (await readBytes(req)).toString('utf8');

  /** kube's 415, naming what came (kubectl's generators send protobuf, which testkit does not read). */
  const unsupportedMedia = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    type: string | undefined,
    accepted: string[],
  ) =>
    send(
      req,
      res,
      415,
      status(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format (${type}) - accepted media types include: ${accepted.join(', ')}`,
      ),
    );

  /** PATCH in kubectl's three forms; the result is validated and stored like a PUT. */
  async function patch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: ResourcePath,
    params: URLSearchParams,
  ) {
    const body = await readBody(req);
    const ns = path.kind.namespaced ? path.namespace : undefined;
    const current = store.get(path.kind, ns, path.name as string);
    if (!current) return send(req, res, 404, status(404, 'NotFound', `${path.kind.plural} "${path.name}" not found`));
    let document: unknown;
    try {
      document = JSON.parse(body);
    } catch (error) {
      return send(req, res, 400, status(400, 'BadRequest', `body is not JSON: ${(error as Error).message}`));
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
    let next: KubeObject;
    try {
      if (type === 'application/merge-patch+json') next = mergePatch(current, document) as KubeObject;
      else if (type === 'application/json-patch+json') next = jsonPatch(current, document) as KubeObject;
      else if (type === 'application/strategic-merge-patch+json')
        next = strategicMergePatch(current, document, mergeKeyAt(path.kind)) as KubeObject;
      else return unsupportedMedia(req, res, type, PATCH_TYPES);
    } catch (error) {
      if (!(error instanceof PatchError)) throw error;
      return send(req, res, 422, status(422, 'Invalid', error.message));
    }
    if (!validateFields(req, res, path.kind, next, params)) return;
    if (next.metadata?.name !== current.metadata.name || next.metadata?.namespace !== current.metadata.namespace)
      return send(req, res, 422, status(422, 'Invalid', 'metadata.name and metadata.namespace cannot be changed'));
    const expected = next.metadata.resourceVersion;
    if (expected && expected !== current.metadata.resourceVersion) return send(req, res, 409, conflict(path, current));
    const immutable = immutableViolation(current, next);
    if (immutable) return send(req, res, 422, status(422, 'Invalid', immutable));
    try {
      return send(req, res, 200, store.apply(next));
    } catch (error) {
      return send(req, res, 422, status(422, 'Invalid', (error as Error).message));
    }
  }

  /**
   * As kube-apiserver's allocator: a Service created without a cluster IP (and not ExternalName or
   * headless) gets a free one, from 10.96.128.0/17 here (tests and the demo pick theirs below it).
   */
  const allocateClusterIp = (object: KubeObject) => {
    const spec = object.spec as { type?: string; clusterIP?: string; clusterIPs?: string[] } | undefined;
    if (object.kind !== 'Service' || !spec || spec.type === 'ExternalName' || spec.clusterIP) return;
    const used = new Set(
      store
        .list(kindOfObject(object) as ResourcePath['kind'])
        .flatMap((o) => (o.spec as { clusterIPs?: string[] })?.clusterIPs ?? []),
    );
    for (let n = 128 * 256 + 1; n < 256 * 256 - 1; n++) {
      const ip = `10.96.${n >> 8}.${n & 255}`;
      if (used.has(ip)) continue;
      spec.clusterIP = ip;
      spec.clusterIPs = [ip];
      return;
    }
  };

  /** kube's immutable fields that clients trip over: a Service's cluster IPs, once set. */
  const immutableViolation = (current: KubeObject, next: KubeObject): string | undefined => {
    if (current.kind !== 'Service') return undefined;
    const before = (current.spec as { clusterIP?: string } | undefined)?.clusterIP;
    const after = (next.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (!before || before === after || (before === 'None' && after === undefined)) return undefined;
    return `Service "${current.metadata.name}" is invalid: spec.clusterIPs[0]: Invalid value: []string{"${after ?? ''}"}: may not change once set`;
  };

  const conflict = (path: ResourcePath, current: KubeObject) =>
    status(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${path.kind.plural} "${current.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
    );

  function write(req: http.IncomingMessage, res: http.ServerResponse, path: ResourcePath, params: URLSearchParams) {
    const type = (req.headers['content-type'] ?? 'application/json').split(';')[0]?.trim();
    if (type !== 'application/json' && type !== PROTOBUF)
      return unsupportedMedia(req, res, type, ['application/json', PROTOBUF]);
    void readBytes(req).then((body) => {
      let object: KubeObject;
      try {
        // kubectl's generators (`kubectl create namespace …`) send protobuf; everything else JSON.
        object = (type === PROTOBUF ? decodeKubeProtobuf(body) : JSON.parse(body.toString('utf8'))) as KubeObject;
      } catch (error) {
        if (error instanceof ProtobufError)
          return unsupportedMedia(req, res, `${type}: ${error.message}`, ['application/json']);
        return send(req, res, 400, status(400, 'BadRequest', `body is not JSON: ${(error as Error).message}`));
      }
      object.apiVersion ??= apiVersionOf(path.kind);
      object.kind ??= path.kind.kind;
      if (path.namespace && object.metadata) object.metadata.namespace ??= path.namespace;
      if (kindOfObject(object) !== path.kind)
        return send(req, res, 400, status(400, 'BadRequest', 'kind does not match the path'));
      if (!validateFields(req, res, path.kind, object, params)) return;
      const exists = store.get(path.kind, object.metadata?.namespace, object.metadata?.name ?? '');
      // A replace that names a resourceVersion is conditional on it (optimistic concurrency).
      const expected = object.metadata?.resourceVersion;
      if (req.method === 'PUT' && exists && expected && expected !== exists.metadata.resourceVersion)
        return send(req, res, 409, conflict(path, exists));
      // As kube-apiserver: a PUT creates only where the kind allows it (Endpoints do, for controllers).
      if (req.method === 'PUT' && !exists && path.kind.kind !== 'Endpoints')
        return send(req, res, 404, status(404, 'NotFound', `${path.kind.plural} "${object.metadata?.name}" not found`));
      if (req.method === 'POST' && !exists) allocateClusterIp(object);
      const immutable = req.method === 'PUT' && exists ? immutableViolation(exists, object) : undefined;
      if (immutable) return send(req, res, 422, status(422, 'Invalid', immutable));
      if (req.method === 'POST' && exists)
        return send(
          req,
          res,
          409,
          status(409, 'AlreadyExists', `${path.kind.plural} "${object.metadata.name}" already exists`),
        );
      try {
        return send(req, res, req.method === 'POST' ? 201 : 200, store.apply(object));
      } catch (error) {
        return send(req, res, 422, status(422, 'Invalid', (error as Error).message));
      }
    });
  }

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(options.port ?? 0);
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host}:${port}`;

  const stop = () =>
    new Promise<void>((resolve) => {
      for (const w of watches) w.destroy();
      for (const s of sockets) s.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  const kubeconfigYaml = () =>
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: testkit',
      '  cluster:',
      `    server: ${url}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      '- name: testkit',
      '  user:',
      '    token: testkit',
      'contexts:',
      '- name: testkit',
      '  context:',
      '    cluster: testkit',
      '    user: testkit',
      'current-context: testkit',
      '',
    ].join('\n');

  return {
    url,
    port,
    store,
    requests,
    apply: (object) => store.apply(object),
    remove: (kindName, namespace, name) => {
      const kind = RESOURCE_KINDS.find((k) => k.kind === kindName || k.plural === kindName);
      if (!kind) throw new Error(`unknown kind ${kindName}`);
      return store.remove(kind, namespace, name);
    },
    kubeconfigYaml,
    writeKubeconfig: (file) => writeFile(file, kubeconfigYaml()),
    openWatches: () => watches.size,
    slowWatchersClosed: () => slowWatchers,
    bytesSent: () => [...sockets].reduce((n, s) => n + s.bytesWritten, closedBytes),
    faults: {
      dropWatches: (dropOptions = {}) => {
        for (const w of watches) {
          if (dropOptions.abrupt) w.destroy();
          else w.end();
        }
      },
      forgetHistory: () => store.compact(),
      failRequests: (code, count, failOptions = {}) => {
        failures = { status: code, count, retryAfterSeconds: failOptions.retryAfterSeconds };
      },
      cutLists: (count) => {
        listsToCut = count;
      },
      delayRequests: (ms) => {
        delayMs = ms;
      },
      stop,
      restart: async () => {
        if (!server.listening) await listen(port);
      },
    },
    close: stop,
  };
}
