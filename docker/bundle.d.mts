/** Entry points of each process bundle, by process (see bundle.mjs). */
export declare const BUNDLES: Record<'record-builder' | 'forwarder' | 'sidecar', string[]>;
