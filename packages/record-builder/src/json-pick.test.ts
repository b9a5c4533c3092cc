import { describe, expect, it } from 'vitest';
import { PickError, type PickSpec, pickJson } from './json-pick.js';

/** What pickJson must give: JSON.parse, then the spec applied to the result. */
function project(value: unknown, spec: PickSpec): unknown {
  if (spec === true) return value;
  if (Array.isArray(spec)) return Array.isArray(value) ? value.map((v) => project(v, spec[0] as PickSpec)) : value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    if (Object.hasOwn(spec, k)) out[k] = project(v, (spec as Record<string, PickSpec>)[k] as PickSpec);
  return out;
}

// A small deterministic generator: values with escapes, brackets in strings, every JSON type.
function generator(seed: number) {
  let s = seed;
  const next = () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x80000000;
  };
  const strings = [
    'a',
    'web',
    '',
    'q"uote',
    'back\\slash',
    '}]{[',
    '\u00e9t\u00e9',
    'tab\there',
    'uni\u2028',
    '10.0.0.1',
  ];
  const keys = ['metadata', 'name', 'items', 'a', 'b"q', 'x\\y', 'endpoints', 'addresses', 'zone'];
  const value = (depth: number): unknown => {
    const r = next();
    if (depth > 3 || r < 0.3) {
      const k = Math.floor(next() * 6);
      return [
        null,
        true,
        false,
        Math.floor(next() * 1e6) - 5e5,
        next() * 100 - 50,
        strings[Math.floor(next() * strings.length)],
      ][k];
    }
    if (r < 0.6) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = Math.floor(next() * 5); i > 0; i--)
      o[keys[Math.floor(next() * keys.length)] as string] = value(depth + 1);
    return o;
  };
  const spec = (v: unknown, depth: number): PickSpec => {
    if (depth > 4 || next() < 0.25) return true;
    if (Array.isArray(v)) return [spec(v[0], depth + 1)];
    if (v && typeof v === 'object') {
      const out: Record<string, PickSpec> = {};
      for (const [k, child] of Object.entries(v)) if (next() < 0.6) out[k] = spec(child, depth + 1);
      if (next() < 0.3) out.absent = true;
      return out;
    }
    return true;
  };
  return { value, spec };
}

describe('picking fields out of JSON text', () => {
  it('gives what JSON.parse and a projection give, for any JSON value, spec and layout', () => {
    const g = generator(20261202);
    for (let i = 0; i < 2000; i++) {
      const value = g.value(0);
      const spec = g.spec(value, 0);
      const text = JSON.stringify(value, null, i % 3 === 0 ? 2 : undefined);
      expect(pickJson(text, spec), text).toEqual(project(JSON.parse(text), spec));
    }
  });

  it('keeps only the named fields of an EndpointSlice-shaped object', () => {
    const slice = {
      kind: 'EndpointSlice',
      metadata: {
        name: 'web-x7k2p',
        namespace: 'prod',
        labels: { 'kubernetes.io/service-name': 'web' },
        managedFields: [{ manager: 'kube-controller-manager', fieldsV1: { 'f:endpoints': {} } }],
      },
      addressType: 'IPv4',
      endpoints: [
        {
          addresses: ['10.244.1.5'],
          conditions: { ready: true },
          targetRef: { kind: 'Pod', name: 'web-1', uid: 'a"b' },
          nodeName: 'node-1',
        },
      ],
    };
    const spec = {
      metadata: { name: true, namespace: true, labels: true },
      addressType: true,
      endpoints: [{ addresses: true, conditions: true }],
    } as const;
    expect(pickJson(JSON.stringify(slice), spec)).toEqual({
      metadata: { name: 'web-x7k2p', namespace: 'prod', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: true } }],
    });
  });

  it('refuses text that is not well formed where it reads, naming where', () => {
    const spec = { a: true, b: { c: true } } as const;
    for (const bad of [
      '',
      '{',
      '{"a":1',
      '{"a" 1}',
      '{"a":1 "b":2}',
      '{"a":}',
      '{"b":{"c":[1,2}}',
      '{"a":"x}',
      '{"a":1} x',
      '{a:1}',
    ])
      expect(() => pickJson(bad, spec), bad).toThrow(PickError);
    // A kept value is checked by JSON.parse: a bad literal there is an error too.
    expect(() => pickJson('{"a":tru}', spec)).toThrow(/in the value at 5/);
  });
});
