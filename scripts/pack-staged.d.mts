/** npm pack's description of one tarball. */
export interface Packed {
  readonly filename: string;
  readonly files: readonly { readonly path: string; readonly size: number; readonly mode: number }[];
  readonly integrity: string;
}
/** Packs runlet's checkout into `destination` with the package's README, as `npm pack` would. */
export declare function packStaged(destination: string, root?: string): { tarball: string; packed: Packed };
