/** runlet's version; a test keeps it equal to package.json's. */
export const VERSION = "0.1.0";

/** The `User-Agent` sent on every worker and client request (docs/protocol.md, "Headers"). */
export const USER_AGENT = `runlet/${VERSION} (node ${process.version}; ${process.platform} ${process.arch})`;
