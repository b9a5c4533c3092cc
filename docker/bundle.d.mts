/** Entry points of each process bundle, by process (see bundle.mjs). */
export declare const BUNDLES: Record<'record-builder' | 'forwarder' | 'sidecar', string[]>;
/** The bundle's text with every non-ASCII character as a \uXXXX escape (see bundle.mjs). */
export declare function asciiOnly(text: string): string;
