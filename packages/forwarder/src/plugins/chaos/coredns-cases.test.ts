import { corednsCaseSuite } from '../../testing/coredns-cases.js';
import { ChaosStage } from './chaos-stage.js';

const stats = () => ({
  cachesize: 0,
  insertions: 0,
  evictions: 0,
  misses: 0,
  hits: 0,
  auth: 0,
  servers: [],
  version: 'v',
});

corednsCaseSuite('chaos', {
  stage: (plugins) => new ChaosStage({ stats, configs: () => plugins.chaos, hostname: 'coredns-5d78c9869d-abcde' }),
});
