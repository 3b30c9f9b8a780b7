/** The first line of a README.md that npm pack's prepack swapped in (see package-readme.mjs). */
export declare const MARK: string;
/** Puts package-readme.md in README.md's place under `root`, keeping the repository's README.md. */
export declare function swap(root: string): void;
/** Puts the repository's README.md back under `root`; true when there was one to put back. */
export declare function restore(root: string): boolean;
/** The README.md the package ships: MARK, then package-readme.md under `root`. */
export declare function packageReadme(root: string): string;
