import { Buffer } from 'node:buffer';
import { decodeMessage } from '@cluster-dns/wire';
import { corednsCaseSuite, nextHandler, type Section } from '../../testing/coredns-cases.js';
import { Dns64Stage } from './dns64-stage.js';

corednsCaseSuite('dns64', {
  stage: (plugins, c) =>
    new Dns64Stage({
      blocks: () => plugins.dns64,
      // The Go tests' fake upstream: what the A lookup dns64 makes on its own gets.
      lookup: async (request) => {
        const reply = nextHandler(c.nextForA as Section | undefined, [])(request);
        return Buffer.isBuffer(reply) ? decodeMessage(reply) : undefined;
      },
    }),
});
