import { corednsCaseSuite } from '../../testing/coredns-cases.js';
import { HostsStage } from './hosts-stage.js';

corednsCaseSuite('hosts', { stage: (plugins) => new HostsStage(() => plugins.hosts) });
