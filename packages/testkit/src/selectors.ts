import type { KubeObject } from './resources.js';

type Test = (object: KubeObject) => boolean;

/** Equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-joined. */
export function parseLabelSelector(text: string | null): Test {
  if (!text) return () => true;
  const tests = text.split(',').map((term): Test => {
    const t = term.trim();
    const labels = (o: KubeObject) => o.metadata.labels ?? {};
    const ne = /^([^!=]+)!=(.*)$/.exec(t);
    if (ne) return (o) => labels(o)[ne[1] as string] !== ne[2];
    const eq = /^([^!=]+)==?(.*)$/.exec(t);
    if (eq) return (o) => labels(o)[eq[1] as string] === eq[2];
    if (t.startsWith('!')) return (o) => !(t.slice(1) in labels(o));
    return (o) => t in labels(o);
  });
  return (o) => tests.every((test) => test(o));
}

/** Field selectors on `metadata.name` and `metadata.namespace`, `=`/`==`/`!=`. */
export function parseFieldSelector(text: string | null): Test {
  if (!text) return () => true;
  const tests = text.split(',').map((term): Test => {
    const m = /^([\w.]+)(!=|==|=)(.*)$/.exec(term.trim());
    if (!m) throw new Error(`unsupported field selector ${JSON.stringify(term)}`);
    const [, field, op, value] = m;
    const read = (o: KubeObject): unknown => {
      let cur: unknown = o;
      for (const part of (field as string).split('.')) cur = (cur as Record<string, unknown> | undefined)?.[part];
      return cur ?? '';
    };
    return op === '!=' ? (o) => read(o) !== value : (o) => read(o) === value;
  });
  return (o) => tests.every((test) => test(o));
}
