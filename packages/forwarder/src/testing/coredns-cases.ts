import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { CorefileError, filesOf, RCODE_BY_NAME, readCorefile, type ServerConfig } from '@cluster-dns/runtime';
import {
  buildQueryMessage,
  classFromText,
  classText,
  createQueryPipeline,
  type DecodedMessage,
  type DecodedRr,
  decodeMessage,
  ednsOptions,
  encodeMessage,
  encodeOptRecord,
  FLAG,
  MessageWriter,
  type Next,
  parseRecordText,
  QCLASS,
  type QueryContext,
  ROOT,
  recordText,
  type Stage,
  sameRecord,
  typeFromText,
  typeName,
} from '@cluster-dns/wire';
import { describe, expect, it } from 'vitest';
import type { BlockScoped } from '../config/block-scoped.js';
import type { ForwarderRequest } from '../config/forwarder-request.js';
import { type BlockPlugins, readBlockPlugins } from '../server/block-plugins.js';
import { blockFilesOf } from '../server/corefile-plan.js';

// CoreDNS's own test tables, translated into data (plugins/<name>/testdata/coredns-cases.json; the
// format is the interfaces below), run against our plugins: setup cases through the one Corefile
// reader, serve cases through a plugin's stage with the Go test's next handler in the chain's place.

export interface SetupCase {
  readonly name: string;
  readonly corefile: string;
  readonly valid: boolean;
  readonly wholeCorefile?: boolean;
  readonly files?: Record<string, string>;
}

export interface Section {
  readonly rcode?: string;
  readonly tc?: boolean;
  readonly answer?: readonly string[];
  readonly authority?: readonly string[];
  readonly additional?: readonly string[];
}

export interface ServeCase {
  readonly name: string;
  readonly zones?: readonly string[];
  readonly corefile: string;
  readonly files?: Record<string, string>;
  readonly query: {
    readonly name: string;
    readonly type: string;
    readonly class?: string;
    readonly remote?: string;
    readonly edns?: boolean;
    readonly bufsize?: number;
    readonly do?: boolean;
    readonly remotePort?: number;
    readonly proto?: 'udp' | 'tcp';
    /** Options the client's OPT carries (data in hex). */
    readonly ednsOptions?: readonly CaseOption[];
  };
  readonly next?: Section & { readonly write?: boolean; readonly echo?: boolean };
  readonly expect: Section & {
    readonly passedOn?: boolean;
    readonly aa?: boolean;
    readonly tc?: boolean;
    readonly answerCount?: number;
    readonly additionalCount?: number;
    /** The question of the reply. */
    readonly question?: CaseQuestion;
    /** The question the next handler was asked. */
    readonly nextQuestion?: CaseQuestion;
    /** The options the next handler's question goes on upstream with. */
    readonly nextEdns0?: readonly CaseOption[];
    /** The options of the reply's OPT: exactly, at least, none of these codes; whether it has one. */
    readonly edns0?: readonly CaseOption[];
    readonly edns0Includes?: readonly { readonly code: number; readonly data?: string }[];
    readonly edns0Excludes?: readonly number[];
    readonly hasOpt?: boolean;
    readonly [more: string]: unknown;
  };
  readonly [more: string]: unknown;
}

export interface CaseQuestion {
  readonly name: string;
  readonly type: string;
  readonly class?: string;
}

/** An EDNS0 option of a case: its code and its data in hex. */
export interface CaseOption {
  readonly code: number;
  readonly data: string;
}

export interface CaseFile {
  readonly plugin: string;
  readonly setup: readonly SetupCase[];
  readonly serve: readonly ServeCase[];
}

export function loadCases(plugin: string): CaseFile {
  return JSON.parse(
    readFileSync(new URL(`../plugins/${plugin}/testdata/coredns-cases.json`, import.meta.url), 'utf8'),
  ) as CaseFile;
}

/** A case's Corefile: its lines inside a block of its zones, or the whole of it. */
export function corefileOf(c: { corefile: string; wholeCorefile?: boolean; zones?: readonly string[] }): string {
  return c.wholeCorefile ? c.corefile : `${(c.zones ?? ['.']).join(' ')} {\n${c.corefile}\n}\n`;
}

/** Reads a case's Corefile as Corefile mode does, its files under /corefile; the error, if refused. */
export function readCase(c: SetupCase | ServeCase): { servers?: ServerConfig[]; error?: CorefileError } {
  try {
    const servers = readCorefile(corefileOf(c), {
      source: '/corefile/Corefile',
      mode: 'pod',
      files: filesOf(c.files ?? {}),
    });
    return { servers };
  } catch (error) {
    if (error instanceof CorefileError) return { error };
    throw error;
  }
}

export const rcodeOf = (name: string | undefined) => RCODE_BY_NAME[name ?? 'NOERROR'] ?? Number(name);

const records = (texts: readonly string[] | undefined): DecodedRr[] => (texts ?? []).map((t) => parseRecordText(t));

/** What the Go test's next handler answers: its sections, or nothing written (plain rcode). */
export function nextHandler(section: Section | undefined, seen: ForwarderRequest[]): Next<ForwarderRequest> {
  return (request) => {
    seen.push(request);
    const q = request.query;
    const writer = new MessageWriter(512).question(q.key, q.qtype, q.qclass);
    for (const rr of records(section?.answer)) writer.record(1, rr);
    for (const rr of records(section?.authority)) writer.record(2, rr);
    for (const rr of records(section?.additional)) writer.record(3, rr);
    const reply = writer.finish(
      q.id,
      FLAG.QR | FLAG.RA | (q.rd ? FLAG.RD : 0) | (section?.tc ? FLAG.TC : 0) | (rcodeOf(section?.rcode) & 0xf),
    );
    return Buffer.from(reply);
  };
}

export interface Asked {
  readonly reply: DecodedMessage | undefined;
  /** The reply as it went out. */
  readonly raw?: Buffer | undefined;
  readonly passedOn: boolean;
  readonly seen: readonly ForwarderRequest[];
}

/** Asks `handle` (the stage in front of the next handler) the case's question, through the real pipeline. */
export async function askCase(
  c: ServeCase,
  chain: (next: Next<ForwarderRequest>) => Next<ForwarderRequest>,
): Promise<Asked> {
  const seen: ForwarderRequest[] = [];
  const handle = chain(nextHandler(c.next, seen));
  const pipeline = createQueryPipeline({
    handle,
    recursionAvailable: true,
    classes: [QCLASS.IN, QCLASS.CH, QCLASS.ANY, 0, 4, 254],
    opcodes: [0],
  });
  const qtype = typeFromText(c.query.type) ?? 1;
  const qclass = classFromText(c.query.class ?? 'IN') ?? 1;
  const edns =
    c.query.edns || c.query.bufsize !== undefined || c.query.do
      ? { udpSize: c.query.bufsize ?? 4096, dnssecOk: c.query.do ?? false }
      : undefined;
  const message = encodeMessage(buildQueryMessage(7, c.query.name, qtype, { qclass, ...(edns ? { edns } : {}) }));
  const raw = c.query.ednsOptions?.length ? withOptions(message, c.query.ednsOptions) : message;
  const remote = c.query.remote ?? '10.240.0.1';
  const context: QueryContext = {
    transport: c.query.proto ?? 'udp',
    remoteAddress: remote,
    remotePort: c.query.remotePort ?? 40212,
    family: remote.includes(':') ? 6 : 4,
  };
  const reply = await pipeline(raw, context);
  const first = Buffer.isBuffer(reply) ? reply : undefined;
  return { reply: first ? decodeMessage(first) : undefined, raw: first, passedOn: seen.length > 0, seen };
}

/** A query message with its OPT record's options replaced by `options` (the message has one OPT, last). */
function withOptions(message: Buffer, options: readonly CaseOption[]): Buffer {
  const decoded = decodeMessage(message);
  const opt = decoded.additionals.find((r) => r.type === 41);
  const record = encodeOptRecord({
    udpSize: opt?.class ?? 4096,
    dnssecOk: ((opt?.ttl ?? 0) & 0x8000) !== 0,
    options: options.map((o) => ({ code: o.code, data: Buffer.from(o.data, 'hex') })),
  });
  const withoutOpt = opt ? message.subarray(0, message.length - 11) : message;
  const out = Buffer.concat([withoutOpt, record]);
  out.writeUInt16BE(1, 10);
  return out;
}

const optionText = (o: { code: number; data: Buffer | string }) =>
  `${o.code}:${typeof o.data === 'string' ? o.data : o.data.toString('hex')}`;

const questionText = (q: { name: string; type: string | number; class?: string | number }) =>
  `${q.name.toLowerCase()} ${typeName(typeof q.type === 'number' ? q.type : (typeFromText(q.type) ?? -1))} ${classText(
    typeof q.class === 'number' ? q.class : (classFromText(q.class ?? 'IN') ?? -1),
  )}`;

/** What differs between a reply and a case's expectation, in words; [] when it matches. */
export function differences(c: ServeCase, result: Asked): string[] {
  const out: string[] = [];
  const e = c.expect;
  if (e.passedOn !== undefined && e.passedOn !== result.passedOn)
    out.push(`passed on: expected ${e.passedOn}, got ${result.passedOn}`);
  if (e.passedOn && e.rcode === undefined && e.answer === undefined) return out;
  const reply = result.reply;
  if (!reply) return [...out, 'no reply'];
  if (e.rcode !== undefined && rcodeOf(e.rcode) !== reply.flags.rcode)
    out.push(`rcode: expected ${e.rcode}, got ${reply.flags.rcode}`);
  if (e.aa !== undefined && e.aa !== reply.flags.aa) out.push(`aa: expected ${e.aa}, got ${reply.flags.aa}`);
  if (e.tc !== undefined && e.tc !== reply.flags.tc) out.push(`tc: expected ${e.tc}, got ${reply.flags.tc}`);
  // Names compare without case: ours echo the asker's spelling (0x20), CoreDNS's the zone's.
  const folded = (r: DecodedRr): DecodedRr =>
    r.target !== undefined ? ({ ...r, name: r.name.toLowerCase(), target: r.target.toLowerCase() } as DecodedRr) : r;
  const compare = (what: string, expected: readonly string[] | undefined, got: readonly DecodedRr[]) => {
    if (expected === undefined) return;
    const want = records(expected).map(folded);
    const have = got.filter((r) => r.type !== 41).map(folded);
    const missing = want.filter((w) => !have.some((h) => sameRecord(w, h)));
    const extra = have.filter((h) => !want.some((w) => sameRecord(w, h)));
    if (missing.length || extra.length)
      out.push(
        `${what}: missing [${missing.map(recordText).join(' | ')}] extra [${extra.map(recordText).join(' | ')}]`,
      );
  };
  const question = reply.questions[0];
  if (e.question && (!question || questionText(question) !== questionText(e.question)))
    out.push(`question: expected ${questionText(e.question)}, got ${question ? questionText(question) : 'none'}`);
  const nextAsked = result.seen[0]?.query;
  if (e.nextQuestion) {
    const got = nextAsked
      ? questionText({ name: nextAsked.qname, type: nextAsked.qtype, class: nextAsked.qclass })
      : 'none';
    if (got !== questionText(e.nextQuestion))
      out.push(`next question: expected ${questionText(e.nextQuestion)}, got ${got}`);
  }
  if (e.nextEdns0) {
    const got = (result.seen[0]?.ednsOptions ?? []).map(optionText).join(' ');
    const want = e.nextEdns0.map(optionText).join(' ');
    if (got !== want) out.push(`options upstream: expected [${want}], got [${got}]`);
  }
  const replyOptions = result.raw ? ednsOptions(result.raw) : undefined;
  if (e.hasOpt !== undefined && e.hasOpt !== (replyOptions !== undefined))
    out.push(`OPT in the reply: expected ${e.hasOpt}, got ${replyOptions !== undefined}`);
  if (e.edns0) {
    const got = (replyOptions ?? []).map(optionText).join(' ');
    const want = e.edns0.map(optionText).join(' ');
    if (got !== want) out.push(`reply options: expected [${want}], got [${got}]`);
  }
  for (const o of e.edns0Includes ?? [])
    if (!replyOptions?.some((r) => r.code === o.code && (o.data === undefined || r.data.toString('hex') === o.data)))
      out.push(`reply options: expected option ${o.code}`);
  for (const code of e.edns0Excludes ?? [])
    if (replyOptions?.some((r) => r.code === code)) out.push(`reply options: option ${code} expected absent`);
  compare('answer', e.answer, reply.answers);
  compare('authority', e.authority, reply.authorities);
  compare('additional', e.additional, reply.additionals);
  if (e.answerCount !== undefined && e.answerCount !== reply.answers.length)
    out.push(`answer count: expected ${e.answerCount}, got ${reply.answers.length}`);
  if (e.additionalCount !== undefined && e.additionalCount !== reply.additionals.filter((r) => r.type !== 41).length)
    out.push(`additional count: expected ${e.additionalCount}`);
  return out;
}

export interface SuiteOptions {
  /** The stage under test, built from the plugins the case's blocks give, in front of `next`. */
  stage(plugins: BlockPlugins, c: ServeCase): Stage<ForwarderRequest>;
  /**
   * Cases CoreDNS runs that we answer otherwise on purpose, each with why (docs/corefile.md says so
   * too). A case listed here must differ: when it starts to pass, the list is wrong.
   */
  notOurs?: Readonly<Record<string, string>>;
  /** Setup cases CoreDNS accepts that we refuse, each with why. */
  refusedHere?: Readonly<Record<string, string>>;
  /** Cases (setup or serve) whose Corefile we refuse on purpose, by a pattern of their name or Corefile, with why. */
  refusedMatching?: readonly (readonly [RegExp, string])[];
}

/** The handler-level view of a block's plugins: the Go tests call a plugin's handler itself. */
function rootScoped(plugins: BlockPlugins): BlockPlugins {
  const root = <T>(list: readonly BlockScoped<T>[]) => list.map((b) => ({ ...b, zones: [ROOT] }));
  return {
    ...plugins,
    templates: root(plugins.templates),
    logs: root(plugins.logs),
    errors: root(plugins.errors),
    bufsize: root(plugins.bufsize),
    dns64: root(plugins.dns64),
    any: root(plugins.any),
    chaos: root(plugins.chaos),
  };
}

/** A plugin's CoreDNS tables as one vitest suite: every setup case read, every serve case asked. */
export function corednsCaseSuite(plugin: string, options: SuiteOptions): void {
  const cases = loadCases(plugin);
  const notOurs = options.notOurs ?? {};
  const refusedHere = options.refusedHere ?? {};
  describe(`${plugin}, against CoreDNS’s own tables (testdata/coredns-cases.json)`, () => {
    const refusedWhy = (name: string, corefile: string) =>
      refusedHere[name] ?? options.refusedMatching?.find(([p]) => p.test(name) || p.test(corefile))?.[1];
    it.each(cases.setup.map((c) => [c.name, c] as const))('setup: %s', (name, c) => {
      const { error } = readCase(c);
      const why = refusedWhy(name, c.corefile);
      if (why && c.valid) {
        expect(error, `refused here: ${why}`).toBeDefined();
        return;
      }
      expect(error === undefined, error?.message ?? 'accepted').toBe(c.valid);
    });
    it.each(cases.serve.map((c) => [c.name, c] as const))('serve: %s', async (name, c) => {
      const { servers, error } = readCase(c);
      // A case of a construct we refuse: refused, unless its Corefile does not use it after all.
      if (error && refusedWhy(name, c.corefile)) return;
      if (error) throw error;
      const plugins = rootScoped(readBlockPlugins(planOfCase(servers ?? []), fileOfCase(c)));
      const stage = options.stage(plugins, c);
      const asked = await askCase(c, (next) => (request) => stage.serve(request, next));
      const found = differences(c, asked);
      if (notOurs[name]) expect(found, `expected to differ: ${notOurs[name]}`).not.toEqual([]);
      else expect(found).toEqual([]);
    });
  });
}

/** What the block plugins need from a plan: the blocks, and their hosts and file lines. */
function planOfCase(servers: ServerConfig[]) {
  return { servers, ...blockFilesOf(servers) };
}

/** A case's files, by the paths the plan made whole (under /corefile). */
function fileOfCase(c: ServeCase): (path: string) => string | undefined {
  return (path) => c.files?.[path.replace(/^\/corefile\//, '')];
}
