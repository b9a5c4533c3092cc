import { corednsCaseSuite } from '../../testing/coredns-cases.js';
import { FileStage } from './file-stage.js';

corednsCaseSuite('file', { stage: (plugins) => new FileStage({ zones: () => plugins.files }) });
