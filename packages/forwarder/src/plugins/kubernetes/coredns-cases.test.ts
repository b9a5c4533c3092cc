import { corednsCaseSuite } from '../../testing/coredns-cases.js';

// The kubernetes plugin's setup tables: the record-builder answers the zones, but the one reader
// takes its lines for both processes.
corednsCaseSuite('kubernetes', {
  stage: () => {
    throw new Error('kubernetes has setup cases only here');
  },
  refusedMatching: [
    [
      /\b(labels|namespace_labels|noendpoints|zonal)\b/,
      'label selectors, noendpoints and zonal are refused, naming the line (the record-builder watches every Service and EndpointSlice)',
    ],
    [/multicluster\s*\n/, 'multicluster names its zones here (clusterset.local): without them it is refused'],
  ],
});
