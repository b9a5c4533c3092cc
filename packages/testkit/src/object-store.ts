import { randomUUID } from 'node:crypto';
import { type KubeObject, kindOfObject, type ResourceKind } from './resources.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoredEvent {
  readonly resourceVersion: number;
  readonly type: WatchEventType;
  readonly kind: ResourceKind;
  readonly object: KubeObject;
}

const keyOf = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * Objects by kind with one cluster-wide resourceVersion counter and a bounded event history,
 * as etcd gives kube-apiserver. A watch from a version older than the history gets 410.
 */
export class ObjectStore {
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private history: StoredEvent[] = [];
  private version = 1;
  /** Watches may resume from this version or later. */
  private compactedVersion = 1;
  private readonly listeners = new Set<(event: StoredEvent) => void>();

  constructor(private readonly historyLimit = 10_000) {}

  get resourceVersion(): number {
    return this.version;
  }

  get oldestResumableVersion(): number {
    return this.compactedVersion;
  }

  list(kind: ResourceKind): KubeObject[] {
    return [...(this.objects.get(kind.plural)?.values() ?? [])];
  }

  get(kind: ResourceKind, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(kind.plural)?.get(`${namespace ?? ''}/${name}`);
  }

  /** Creates or replaces an object; returns the stored copy with its new metadata. */
  apply(input: KubeObject): KubeObject {
    const kind = kindOfObject(input);
    if (!kind) throw new Error(`unsupported kind ${input.apiVersion}/${input.kind}`);
    if (!input.metadata?.name) throw new Error(`${input.kind} without metadata.name`);
    if (kind.namespaced && !input.metadata.namespace)
      input = { ...input, metadata: { ...input.metadata, namespace: 'default' } };
    const byKey = this.objects.get(kind.plural) ?? new Map<string, KubeObject>();
    this.objects.set(kind.plural, byKey);
    const previous = byKey.get(keyOf(input));
    const object: KubeObject = structuredClone(input);
    this.version++;
    object.metadata.uid = previous?.metadata.uid ?? input.metadata.uid ?? randomUUID();
    object.metadata.creationTimestamp = previous?.metadata.creationTimestamp ?? new Date().toISOString();
    object.metadata.generation = (previous?.metadata.generation ?? 0) + 1;
    object.metadata.resourceVersion = String(this.version);
    byKey.set(keyOf(object), object);
    this.record({ resourceVersion: this.version, type: previous ? 'MODIFIED' : 'ADDED', kind, object });
    return object;
  }

  /** Deletes an object; returns false when there was none. */
  remove(kind: ResourceKind, namespace: string | undefined, name: string): boolean {
    const byKey = this.objects.get(kind.plural);
    const key = `${kind.namespaced ? (namespace ?? 'default') : ''}/${name}`;
    const previous = byKey?.get(key);
    if (!byKey || !previous) return false;
    byKey.delete(key);
    this.version++;
    const object = structuredClone(previous);
    object.metadata.resourceVersion = String(this.version);
    this.record({ resourceVersion: this.version, type: 'DELETED', kind, object });
    return true;
  }

  /** Events after `version`, or undefined when the history no longer reaches back that far. */
  eventsAfter(version: number): StoredEvent[] | undefined {
    if (version < this.compactedVersion) return undefined;
    return this.history.filter((e) => e.resourceVersion > version);
  }

  /** Drops all history, as an etcd compaction would: older watches get 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedVersion = this.version;
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(event: StoredEvent): void {
    this.history.push(event);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.historyLimit);
      this.compactedVersion = (dropped.at(-1) as StoredEvent).resourceVersion;
    }
    for (const listener of this.listeners) listener(event);
  }
}
