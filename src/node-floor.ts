/**
 * The oldest Node runlet runs on: undici 8's own floor (its `engines`), on the Node 22 LTS line.
 * package.json's `engines` says the same (a test keeps them equal); bin/runlet.mjs reads it
 * there, and a bundle's first lines check it ({@link nodeFloorCheckSource}).
 */
export const NODE_FLOOR = "22.19.0";

/** True when `version` (`process.versions.node`'s form: `22.19.0`) is older than {@link NODE_FLOOR}. */
export function belowNodeFloor(version: string): boolean {
  const have = version.replace(/^v/, "").split(".").map(Number);
  const need = NODE_FLOOR.split(".").map(Number);
  for (let i = 0; i < need.length; i++) {
    const a = have[i] ?? 0;
    const b = need[i]!;
    if (a !== b) return a < b;
  }
  return false;
}

/** The refusal: both versions, and what to do. */
export function nodeFloorMessage(who: string, version: string): string {
  return `${who}: this is Node ${version.replace(/^v/, "")}; runlet needs Node ${NODE_FLOOR} or later (Node 22 LTS: undici 8's floor). Run it with a newer node (the container image has one) (RUNLET_NODE_TOO_OLD)`;
}

/**
 * JavaScript that refuses to go on below the floor, for the first lines of a bundle (before any
 * of runlet's modules run): one line on stderr, exit code 1.
 */
export function nodeFloorCheckSource(who: string): string {
  const [major, minor, patch] = NODE_FLOOR.split(".").map(Number);
  return [
    "{",
    '  const [__a, __b, __c] = process.versions.node.split(".").map(Number);',
    `  if (__a < ${major} || (__a === ${major} && (__b < ${minor} || (__b === ${minor} && __c < ${patch})))) {`,
    `    process.stderr.write(${JSON.stringify(nodeFloorMessage(who, "VERSION"))}.replace("VERSION", process.versions.node) + "\\n");`,
    "    process.exit(1);",
    "  }",
    "}",
  ].join("\n");
}
