import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { type KubeObject, kindOfObject } from './resources.js';

/** Reads every `*.yaml`/`*.yml` file of a folder (multi-document allowed) as objects to serve. */
export async function loadManifestFolder(folder: string): Promise<KubeObject[]> {
  const files = (await readdir(folder)).filter((f) => /\.ya?ml$/.test(f)).sort();
  const objects: KubeObject[] = [];
  for (const file of files) {
    const docs = loadAllYaml(await readFile(join(folder, file), 'utf8')) as Array<KubeObject | null>;
    for (const doc of docs) {
      if (!doc) continue;
      if (!kindOfObject(doc)) throw new Error(`${file}: unsupported kind ${doc.apiVersion}/${doc.kind}`);
      objects.push(doc);
    }
  }
  return objects;
}
