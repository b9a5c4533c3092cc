import { createHash } from 'node:crypto';
import { type CorefileFiles, diskFiles, recordingFiles } from './corefile-files.js';
import { parseCorefile } from './parse.js';

/**
 * What a Corefile's reload depends on beyond its own text: every file its imports read and every
 * glob's matches, hashed. A changed `coredns-custom` ConfigMap (AKS, k3s) changes it, and so does a
 * file appearing under a glob. A Corefile that does not parse hashes its error, so a fix is noticed.
 */
export function importsFingerprint(
  text: string,
  source: string,
  options: { files?: CorefileFiles; env?: Readonly<Record<string, string | undefined>> } = {},
): string {
  const recording = recordingFiles(options.files ?? diskFiles);
  const hash = createHash('sha256');
  try {
    parseCorefile(text, { source, files: recording, ...(options.env ? { env: options.env } : {}) });
  } catch (error) {
    hash.update(`error ${(error as Error).message}\0`);
  }
  for (const [path, body] of recording.seen.files) hash.update(`file ${path}\0${body}\0`);
  for (const [pattern, matches] of recording.seen.globs) hash.update(`glob ${pattern}\0${matches.join('\0')}\0`);
  return hash.digest('hex').slice(0, 16);
}
