import type { EndpointGroup, ServiceInfo, ServicePort } from './cluster-model.js';

/** More distinct words than this and the table starts again: sharing is a saving, never a must. */
const MAX_WORDS = 50_000;

/**
 * One copy of each word the store repeats: namespaces, port names, protocols, Service kinds. An
 * update arrives by structured clone with its own copy of every string, so without this 10,000
 * Services held ~40,000 copies of `tcp`, `http`, `cluster-ip` and their namespace, all visited by
 * every full GC of the answering thread. Equal strings are equal: only memory changes.
 */
export class SharedWords {
  private readonly words = new Map<string, string>();

  word<T extends string>(text: T): T {
    const held = this.words.get(text);
    if (held !== undefined) return held as T;
    if (this.words.size >= MAX_WORDS) this.words.clear();
    this.words.set(text, text);
    return text;
  }

  get size(): number {
    return this.words.size;
  }

  service(info: ServiceInfo): ServiceInfo {
    return { ...info, namespace: this.word(info.namespace), kind: this.word(info.kind), ports: this.ports(info.ports) };
  }

  group(group: EndpointGroup): EndpointGroup {
    return { ...group, namespace: this.word(group.namespace), ports: this.ports(group.ports) };
  }

  private ports(ports: readonly ServicePort[]): ServicePort[] {
    return ports.map((p) => ({ name: this.word(p.name), port: p.port, protocol: this.word(p.protocol) }));
  }
}
