import { corednsCaseSuite } from '../../testing/coredns-cases.js';
import { TemplateStage } from './template-stage.js';

corednsCaseSuite('template', {
  stage: (plugins) => new TemplateStage({ templates: () => plugins.templates }),
  refusedMatching: [
    [
      /needs (var|expr) support/,
      'var and expr (expr-lang, on CoreDNS’s master branch, in no release) are refused, naming the line',
    ],
  ],
});
