// What kubelet and a client would do to a running Pod, run inside the Pod's network namespace by
// test/pod/run.mjs: every probe of the manifest (its own port and path, retried as kubelet retries
// until its failure threshold), and DNS queries through port 53. Prints one JSON object per check.
//   node test/pod/check.mjs '<json: { podIp, probes, queries, deadlineMs }>'
import { queryDns, typeFromName } from '@cluster-dns/wire';

const {
  podIp,
  probes = [],
  queries = [],
  deadlineMs = 30_000,
  expectProbeFailure = false,
} = JSON.parse(process.argv[2]);
const results = [];
const report = (check, ok, detail) => {
  results.push({ check, ok, detail });
  console.log(JSON.stringify({ check, ok, detail }));
};

/** kubelet's httpGet: success is a status from 200 to 399; it retries every period until the deadline. */
async function probe({ container, kind, path, port }) {
  const url = `http://${podIp}:${port}${path}`;
  const deadline = Date.now() + (expectProbeFailure ? 5000 : deadlineMs);
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      last = `HTTP ${res.status}`;
      if (res.status >= 200 && res.status < 400) return { ok: true, detail: `${url}: ${last}` };
    } catch (error) {
      last = error.cause?.code ?? error.message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return { ok: false, detail: `${container} ${kind} ${url}: ${last}` };
}

for (const p of probes) {
  const { ok, detail } = await probe(p);
  report(`${p.container} ${p.kind} GET :${p.port}${p.path}`, ok, detail);
}

for (const q of queries) {
  const label = `DNS ${q.transport} ${q.type} ${q.name}`;
  try {
    const deadline = Date.now() + deadlineMs;
    let reply;
    // The forwarder answers at once; the cluster names need the record-builder's first sync.
    for (;;) {
      reply = await queryDns({ host: podIp, port: 53 }, q.name, typeFromName(q.type), {
        transport: q.transport,
        timeoutMs: 3000,
      });
      if (reply.flags.rcode === q.rcode || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const got = reply.answers.map((a) => a.address ?? a.target ?? a.text?.join(' ')).sort();
    const ok = reply.flags.rcode === q.rcode && JSON.stringify(got) === JSON.stringify([...q.answers].sort());
    report(label, ok, `rcode ${reply.flags.rcode}, answers ${got.join(' ')}`);
  } catch (error) {
    report(label, false, error.message);
  }
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
