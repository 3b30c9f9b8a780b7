/** The package.json text that ships (no scripts, devDependencies or overrides), made from the repository's. */
export declare function shippedManifest(text: string): string;
/** Writes the shipped package.json in place under `root`, keeping the repository's. */
export declare function strip(root: string): void;
/** Puts the repository's package.json back under `root`; true when there was one to put back. */
export declare function restore(root: string): boolean;
