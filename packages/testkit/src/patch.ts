// The three PATCH bodies kubectl sends, applied as kube-apiserver applies them: JSON merge patch
// (RFC 7386), JSON patch (RFC 6902), and strategic merge patch (lists with a merge key merged by
// that key, the `$patch`, `$setElementOrder` and `$deleteFromPrimitiveList` directives).

type Json = unknown;
type JsonObject = Record<string, Json>;

const isObject = (v: Json): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

export class PatchError extends Error {}

/** RFC 7386: objects merge, null deletes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

const unescapeToken = (token: string) => token.replaceAll('~1', '/').replaceAll('~0', '~');
function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new PatchError(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer.slice(1).split('/').map(unescapeToken);
}

/** RFC 6902: add, remove, replace, move, copy, test, in order; any failure rejects the whole patch. */
export function jsonPatch(target: Json, operations: Json): Json {
  if (!Array.isArray(operations)) throw new PatchError('a JSON patch is an array of operations');
  let doc = clone(target);
  const parentOf = (path: string[]): [Json, string] => {
    let node: Json = doc;
    for (const token of path.slice(0, -1)) {
      if (Array.isArray(node)) node = node[Number(token)];
      else if (isObject(node)) node = node[token];
      else node = undefined;
      if (node === undefined) throw new PatchError(`path /${path.join('/')} does not exist`);
    }
    return [node, path.at(-1) as string];
  };
  const get = (path: string[]): Json => {
    let node: Json = doc;
    for (const token of path) {
      node = Array.isArray(node) ? node[Number(token)] : isObject(node) ? node[token] : undefined;
      if (node === undefined) throw new PatchError(`path /${path.join('/')} does not exist`);
    }
    return node;
  };
  const remove = (path: string[]): Json => {
    const [parent, key] = parentOf(path);
    if (Array.isArray(parent)) {
      const i = Number(key);
      if (!(i >= 0 && i < parent.length)) throw new PatchError(`index ${key} out of range`);
      return parent.splice(i, 1)[0];
    }
    if (!isObject(parent) || !(key in parent)) throw new PatchError(`path /${path.join('/')} does not exist`);
    const value = parent[key];
    delete parent[key];
    return value;
  };
  const add = (path: string[], value: Json) => {
    if (path.length === 0) {
      doc = clone(value);
      return;
    }
    const [parent, key] = parentOf(path);
    if (Array.isArray(parent)) {
      const i = key === '-' ? parent.length : Number(key);
      if (!(i >= 0 && i <= parent.length)) throw new PatchError(`index ${key} out of range`);
      parent.splice(i, 0, clone(value));
    } else if (isObject(parent)) parent[key] = clone(value);
    else throw new PatchError(`path /${path.join('/')} has no parent object`);
  };
  for (const op of operations as JsonObject[]) {
    const path = parsePointer(String(op.path ?? ''));
    switch (op.op) {
      case 'add':
        add(path, op.value);
        break;
      case 'remove':
        remove(path);
        break;
      case 'replace':
        remove(path);
        add(path, op.value);
        break;
      case 'move':
        add(path, remove(parsePointer(String(op.from ?? ''))));
        break;
      case 'copy':
        add(path, get(parsePointer(String(op.from ?? ''))));
        break;
      case 'test':
        if (JSON.stringify(get(path)) !== JSON.stringify(op.value))
          throw new PatchError(`test failed at ${String(op.path)}`);
        break;
      default:
        throw new PatchError(`unknown JSON patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return doc;
}

/** Where a list merges by key under strategic merge patch: the schema's x-kubernetes-patch-merge-key. */
export type MergeKeys = (path: readonly string[]) => string | undefined;

/**
 * Strategic merge patch as kubectl apply and edit compute it: maps merge, null deletes, lists with
 * a merge key merge item by item (`$patch: delete` removes one), other lists are replaced;
 * `$setElementOrder/<list>` orders a merged list, `$deleteFromPrimitiveList/<list>` removes
 * primitives, `$patch: replace` on a map replaces it, `$retainKeys` keeps only those keys.
 */
export function strategicMergePatch(target: Json, patch: Json, mergeKeys: MergeKeys, path: string[] = []): Json {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === 'delete') return undefined;
  const out: JsonObject = isObject(target) ? { ...target } : {};
  const retain = Array.isArray(patch.$retainKeys) ? new Set(patch.$retainKeys as string[]) : undefined;
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys' || key.startsWith('$setElementOrder/')) continue;
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      const list = key.slice('$deleteFromPrimitiveList/'.length);
      const drop = new Set((value as Json[]).map((v) => JSON.stringify(v)));
      if (Array.isArray(out[list])) out[list] = (out[list] as Json[]).filter((v) => !drop.has(JSON.stringify(v)));
      continue;
    }
    if (value === null) {
      delete out[key];
      continue;
    }
    const here = [...path, key];
    const mergeKey = Array.isArray(value) ? mergeKeys(here) : undefined;
    if (mergeKey && Array.isArray(out[key])) {
      out[key] = mergeList(out[key] as Json[], value as Json[], mergeKey, mergeKeys, here);
      const order = patch[`$setElementOrder/${key}`];
      if (Array.isArray(order)) out[key] = orderBy(out[key] as JsonObject[], order as JsonObject[], mergeKey);
    } else {
      const merged = strategicMergePatch(out[key], value, mergeKeys, here);
      if (merged === undefined) delete out[key];
      else out[key] = Array.isArray(value) ? stripDirectives(merged) : merged;
    }
  }
  if (retain) for (const key of Object.keys(out)) if (!retain.has(key)) delete out[key];
  return out;
}

function stripDirectives(list: Json): Json {
  return Array.isArray(list) ? list.filter((item) => !(isObject(item) && item.$patch === 'delete')) : list;
}

function mergeList(current: Json[], patch: Json[], key: string, mergeKeys: MergeKeys, path: string[]): Json[] {
  const out = current.map((item) => clone(item));
  for (const item of patch) {
    if (!isObject(item)) continue;
    const at = out.findIndex((o) => isObject(o) && o[key] === item[key]);
    if (item.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
      continue;
    }
    if (at >= 0) out[at] = strategicMergePatch(out[at], item, mergeKeys, path);
    else out.push(strategicMergePatch(undefined, item, mergeKeys, path));
  }
  return out;
}

function orderBy(list: JsonObject[], order: JsonObject[], key: string): JsonObject[] {
  const rank = new Map(order.map((o, i) => [o[key], i]));
  return [...list].sort((a, b) => (rank.get(a[key]) ?? Infinity) - (rank.get(b[key]) ?? Infinity));
}
