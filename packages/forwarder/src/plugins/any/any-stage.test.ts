import { corednsCaseSuite } from '../../testing/coredns-cases.js';
import { AnyStage } from './any-stage.js';

corednsCaseSuite('any', { stage: (plugins) => new AnyStage(() => plugins.any) });
