import { type Cidr, parseCidr, QTYPE, typeFromName } from '@cluster-dns/wire';
import type { DirectiveArgs } from '../args.js';

/** What a matching query gets: answered on, REFUSED, an empty NOERROR, or no reply at all. */
export type AclAction = 'allow' | 'block' | 'filter' | 'drop';

/** One line of an `acl` block: the first line a query matches decides. */
export interface AclRule {
  readonly action: AclAction;
  /** Question types it covers; empty: every type (`type *`, or no `type`). */
  readonly types: readonly number[];
  /** Client addresses it covers (the pod a trusted node cache names, else the sender); empty: all. */
  readonly nets: readonly Cidr[];
  /** Ours: the client's namespace, from the record-builder's client map; empty: any (and unknown). */
  readonly namespaces: readonly string[];
  readonly line: number;
}

export interface AclConfig {
  /** The zones it covers; none: the block's. */
  readonly zones: readonly string[];
  readonly rules: readonly AclRule[];
}

const ACTIONS: readonly AclAction[] = ['allow', 'block', 'filter', 'drop'];
const KEYWORDS = ['type', 'net', 'namespace'] as const;

/**
 * `acl [ZONES...] { ACTION [type QTYPE...] [net SOURCE...] [namespace NS...] }` (CoreDNS's acl,
 * with `namespace` ours): `allow` answers on, `block` answers REFUSED, `filter` an empty NOERROR,
 * `drop` nothing. `*` in `type` or `net` means any. A query matching no line is allowed.
 */
export function setupAcl(a: DirectiveArgs): AclConfig {
  const zones = [...a.directive.args];
  const block = a.directive.block;
  if (!block?.length) a.fail('needs a { … } block of rules (ACTION [type QTYPE...] [net SOURCE...] [namespace NS...])');
  const rules = block.map((d): AclRule => {
    const s = a.sub(d);
    return aclRuleOf([d.name, ...d.args], (message) => s.fail(message), d.line);
  });
  return { zones, rules };
}

/**
 * One rule, `ACTION [type QTYPE...] [net SOURCE...] [namespace NS...]`, as words: an `acl` block's
 * line, or the forwarder's `--acl` flag. `fail` throws naming where it came from.
 */
export function aclRuleOf(words: readonly string[], fail: (message: string) => never, line = 0): AclRule {
  const [name, ...args] = words;
  if (name === undefined || !(ACTIONS as readonly string[]).includes(name))
    fail(`the action must be ${ACTIONS.join(', ')}; got ${JSON.stringify(name ?? '')}`);
  const lists: Record<(typeof KEYWORDS)[number], string[]> = { type: [], net: [], namespace: [] };
  let current: (typeof KEYWORDS)[number] | undefined;
  for (const word of args) {
    if ((KEYWORDS as readonly string[]).includes(word)) {
      current = word as (typeof KEYWORDS)[number];
      continue;
    }
    if (current === undefined) return fail(`expected type, net or namespace before ${JSON.stringify(word)}`);
    lists[current].push(word);
  }
  const types = lists.type.includes('*')
    ? []
    : lists.type.map((raw): number => {
        const type = typeFromName(raw.toUpperCase());
        if (type === undefined || type === QTYPE.OPT) return fail(`${JSON.stringify(raw)} is not a record type`);
        return type;
      });
  const nets = lists.net.includes('*')
    ? []
    : lists.net.map((raw) => parseCidr(raw) ?? fail(`${JSON.stringify(raw)} is not an IP address or CIDR block`));
  return { action: name as AclAction, types, nets, namespaces: lists.namespace, line };
}
