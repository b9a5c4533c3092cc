import type { Buffer } from 'node:buffer';
import { HEADER_BYTES, QTYPE, readName, toFqdn } from '@cluster-dns/wire';
import { rewriteQuestion } from '../plugins/rewrite/rewrite-rules.js';
import type { BlockPlugins } from './block-plugins.js';

/**
 * Which cached answers the express lane must leave to the chain because a plugin before the cache
 * would answer otherwise (CONTRIBUTING, "express lane"): a `log` that logs more than errors sees
 * every query; `dns64` AAAA and `any` ANY answers are made before the cache; a name a `rewrite`
 * rule matches is asked as another; a cached answer bigger than a block's `bufsize` is truncated
 * by the chain. Made once per config; the lane pays for a check only when the config has one.
 */
export function laneBypassOf(
  plugins: BlockPlugins,
): ((raw: Buffer, reply: Buffer, qtype: number) => boolean) | undefined {
  const logsHits = plugins.logs.some((b) =>
    (b.value ?? []).some((r) => r.classes.has('all') || r.classes.has('success') || r.classes.has('denial')),
  );
  if (logsHits) return () => true;
  const types = new Set<number>([
    ...(plugins.dns64.length ? [QTYPE.AAAA] : []),
    ...(plugins.any.length ? [QTYPE.ANY] : []),
  ]);
  const sizeLimit = plugins.bufsize.length
    ? Math.min(...plugins.bufsize.map((b) => b.value ?? Number.POSITIVE_INFINITY))
    : Number.POSITIVE_INFINITY;
  // edns0 rules change only what goes upstream, which a cached answer never does.
  const rewrites = plugins.rewrites.flatMap((b) => b.rules).filter((r) => r.field !== 'edns0');
  if (types.size === 0 && sizeLimit === Number.POSITIVE_INFINITY && rewrites.length === 0) return undefined;
  return (raw, reply, qtype) => {
    if (types.has(qtype) || reply.length > sizeLimit) return true;
    if (rewrites.length === 0) return false;
    const { name, end } = readName(raw, HEADER_BYTES);
    return rewriteQuestion(rewrites, toFqdn(name.toLowerCase()), qtype, raw.readUInt16BE(end + 2)) !== undefined;
  };
}
