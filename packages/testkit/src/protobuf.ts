// kube-apiserver's protobuf encoding, read for the few kinds kubectl's generators create
// (`kubectl create namespace|configmap|service …` send `application/vnd.kubernetes.protobuf`):
// the `k8s\0` magic, a runtime.Unknown envelope (typeMeta, raw), and the object's message, decoded
// field by field from the numbers in k8s.io/api's generated.proto. Fields not listed are skipped.

type Kind =
  | 'string'
  | 'int'
  | 'bool'
  | 'bytes'
  | 'intOrString'
  | Message
  | { map: 'string' | 'bytes' }
  | { repeated: Kind };
interface Message {
  readonly fields: Readonly<Record<number, readonly [string, Kind]>>;
}

export class ProtobufError extends Error {}

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const message = (fields: Record<number, readonly [string, Kind]>): Message => ({ fields });

const OBJECT_META = message({
  1: ['name', 'string'],
  2: ['generateName', 'string'],
  3: ['namespace', 'string'],
  5: ['uid', 'string'],
  6: ['resourceVersion', 'string'],
  11: ['labels', { map: 'string' }],
  12: ['annotations', { map: 'string' }],
  14: ['finalizers', { repeated: 'string' }],
});
const SERVICE_PORT = message({
  1: ['name', 'string'],
  2: ['protocol', 'string'],
  3: ['port', 'int'],
  4: ['targetPort', 'intOrString'],
  5: ['nodePort', 'int'],
  6: ['appProtocol', 'string'],
});
const KINDS: Record<string, Message> = {
  'v1/Namespace': message({
    1: ['metadata', OBJECT_META],
    2: ['spec', message({ 1: ['finalizers', { repeated: 'string' }] })],
  }),
  'v1/ConfigMap': message({
    1: ['metadata', OBJECT_META],
    2: ['data', { map: 'string' }],
    3: ['binaryData', { map: 'bytes' }],
    4: ['immutable', 'bool'],
  }),
  'v1/Service': message({
    1: ['metadata', OBJECT_META],
    2: [
      'spec',
      message({
        1: ['ports', { repeated: SERVICE_PORT }],
        2: ['selector', { map: 'string' }],
        3: ['clusterIP', 'string'],
        4: ['type', 'string'],
        5: ['externalIPs', { repeated: 'string' }],
        7: ['sessionAffinity', 'string'],
        10: ['externalName', 'string'],
        11: ['externalTrafficPolicy', 'string'],
        13: ['publishNotReadyAddresses', 'bool'],
        17: ['ipFamilyPolicy', 'string'],
        18: ['clusterIPs', { repeated: 'string' }],
        19: ['ipFamilies', { repeated: 'string' }],
        22: ['internalTrafficPolicy', 'string'],
      }),
    ],
  }),
};

/** Each field of a message: its number, wire type and value (a varint, or the bytes of a length-delimited field). */
function* fieldsOf(buf: Buffer): Generator<{ no: number; wire: number; value: bigint | Buffer }> {
  let at = 0;
  const varint = (): bigint => {
    let out = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= buf.length || shift > 63n) throw new ProtobufError('truncated varint');
      const b = buf[at++] as number;
      out |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return out;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) yield { no, wire, value: varint() };
    else if (wire === 2) {
      const length = Number(varint());
      if (at + length > buf.length) throw new ProtobufError('field runs past the end');
      yield { no, wire, value: buf.subarray(at, at + length) };
      at += length;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else throw new ProtobufError(`unsupported wire type ${wire}`);
  }
}

function decodeValue(kind: Kind, value: bigint | Buffer): unknown {
  if (kind === 'string') return (value as Buffer).toString('utf8');
  if (kind === 'bytes') return (value as Buffer).toString('base64');
  if (kind === 'int') return Number(BigInt.asIntN(32, value as bigint));
  if (kind === 'bool') return value !== 0n;
  if (kind === 'intOrString') {
    const v = decodeMessage(
      message({ 1: ['type', 'int'], 2: ['intVal', 'int'], 3: ['strVal', 'string'] }),
      value as Buffer,
    );
    return v.type === 1 ? v.strVal : (v.intVal ?? 0);
  }
  if (typeof kind === 'object' && 'fields' in kind) return decodeMessage(kind, value as Buffer);
  throw new ProtobufError('unexpected field kind');
}

function decodeMessage(schema: Message, buf: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { no, value } of fieldsOf(buf)) {
    const field = schema.fields[no];
    if (!field) continue;
    const [name, kind] = field;
    if (typeof kind === 'object' && 'map' in kind) {
      const entry = decodeMessage(message({ 1: ['key', 'string'], 2: ['value', kind.map] }), value as Buffer);
      const map = (out[name] ?? {}) as Record<string, unknown>;
      map[String(entry.key ?? '')] = entry.value ?? '';
      out[name] = map;
    } else if (typeof kind === 'object' && 'repeated' in kind) {
      const list = (out[name] ?? []) as unknown[];
      list.push(decodeValue(kind.repeated, value));
      out[name] = list;
    } else {
      // Go's encoder writes every optional scalar, set or not; JSON omits the empty ones.
      const decoded = decodeValue(kind, value);
      if (decoded !== '' && decoded !== 0 && decoded !== false) out[name] = decoded;
    }
  }
  return out;
}

/** The JSON form of a protobuf-encoded object, or ProtobufError for anything else. */
export function decodeKubeProtobuf(body: Buffer): Record<string, unknown> {
  if (!body.subarray(0, 4).equals(MAGIC)) throw new ProtobufError('no k8s protobuf magic');
  const unknown = decodeMessage(
    message({
      1: ['typeMeta', message({ 1: ['apiVersion', 'string'], 2: ['kind', 'string'] })],
      2: ['raw', 'bytes'],
    }),
    body.subarray(4),
  );
  const typeMeta = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  const schema = KINDS[`${typeMeta.apiVersion}/${typeMeta.kind}`];
  if (!schema)
    throw new ProtobufError(`${typeMeta.apiVersion}/${typeMeta.kind} is not read from protobuf here; send JSON`);
  const raw = Buffer.from(String(unknown.raw ?? ''), 'base64');
  return { apiVersion: typeMeta.apiVersion, kind: typeMeta.kind, ...decodeMessage(schema, raw) };
}
