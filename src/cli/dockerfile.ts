/**
 * The layout shared by Dockerfile.base and the project Dockerfile `runlet build` writes. A test
 * (test/cli/dockerfile.test.ts) parses both files and checks them against these values, so the
 * bundle lands where the base image's CMD looks for it, under the user the base image created.
 */
export const IMAGE_LAYOUT = {
  /** The tag the docs tell users to give the image built from Dockerfile.base. */
  baseImage: "runlet-base:node22",
  workdir: "/app",
  bundlePath: "/app/worker.mjs",
  user: "runlet",
  entrypoint: ["/usr/bin/tini", "--"],
  cmd: ["node", "/app/worker.mjs"],
} as const;

/** A native addon left out of the bundle, installed into the image at the version the project uses. */
export interface ExternalPackage {
  readonly name: string;
  /** The installed version, from the project's node_modules; `undefined` installs the latest. */
  readonly version: string | undefined;
}

/**
 * The project Dockerfile: the base image plus the bundle (and its source map). Packages declared
 * external (native addons) are installed into /app/node_modules at build time, where the bundle's
 * imports find them.
 */
export function renderProjectDockerfile(externals: readonly ExternalPackage[] = []): string {
  const { baseImage, workdir, user, cmd } = IMAGE_LAYOUT;
  const lines = [
    "# syntax=docker/dockerfile:1",
    "#",
    "# The worker image: runlet's base image plus this project's bundle. Written by `runlet build`",
    "# when the project has no Dockerfile; edit it freely, runlet never overwrites it.",
    "#",
    "#   docker build -t runlet-base:node22 - < node_modules/runlet/Dockerfile.base   # once",
    "#   npx runlet build && docker build -t my-worker .",
    "",
    `ARG RUNLET_BASE_IMAGE=${baseImage}`,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Docker's own variable syntax
    "FROM ${RUNLET_BASE_IMAGE}",
    "",
  ];
  if (externals.length > 0) {
    const specs = externals.map((e) => (e.version === undefined ? e.name : `${e.name}@${e.version}`));
    lines.push(
      "# Native addons are not bundled (runlet build --external); install them where the bundle looks.",
      "USER root",
      `RUN cd ${workdir} && npm install --omit=dev --no-save --no-audit --no-fund ${specs.join(" ")} \\`,
      "    && npm cache clean --force",
      "",
    );
  }
  lines.push(
    "# The bundle carries runlet and every other dependency; the map makes stack traces readable.",
    `COPY dist/worker.mjs dist/worker.mjs.map ${workdir}/`,
    "",
    `USER ${user}`,
    `CMD ${JSON.stringify(cmd).replaceAll('","', '", "')}`,
    "",
  );
  return lines.join("\n");
}
