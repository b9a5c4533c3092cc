#!/usr/bin/env node
/**
 * One DNS query with wire's client, the reply printed as JSON: for tests that must ask from inside
 * a network namespace.
 *   node packages/testkit/dist/query-cli.js <server ip> <port> <name> [type] [udp|tcp]
 */
import { queryDns, typeFromName } from '@cluster-dns/wire';

const [host = '127.0.0.1', port = '53', name = '.', type = 'A', transport = 'udp'] = process.argv.slice(2);
const reply = await queryDns({ host, port: Number(port) }, name, typeFromName(type) ?? 1, {
  transport: transport === 'tcp' ? 'tcp' : 'udp',
  timeoutMs: 5000,
});
process.stdout.write(`${JSON.stringify(reply, (_k, v) => (Buffer.isBuffer(v) ? v.toString('hex') : v))}\n`);
