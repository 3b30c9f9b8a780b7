/**
 * Measures (does not assert) what unauthenticated posts cost the harness (issue 22, item 1): the
 * harness runs in a child process; this process sends `--posts` POSTs of `--mib` MiB each, without
 * a key, to a worker route (job-done of an endpoint that does not exist), one after another, and
 * prints the child's RSS before and after, after a full collection in the child.
 *
 *   node bin/run-ts.mjs bench/hostile-posts.ts [--posts 30] [--mib 19]
 */
import { fork } from "node:child_process";
import { request } from "node:http";
import { fileURLToPath } from "node:url";

interface Reply {
  readonly url?: string;
  readonly rss?: number;
}

if (process.argv[2] === "--child") {
  const { startHarness } = await import("../src/harness/index.js");
  const h = await startHarness({ takeTimeoutMs: 1_000 });
  process.on("message", (msg: string) => {
    if (msg === "rss") {
      (globalThis as { gc?: () => void }).gc?.();
      process.send?.({ rss: process.memoryUsage().rss } satisfies Reply);
    } else if (msg === "close") {
      void h.close().then(() => process.exit(0));
    }
  });
  process.send?.({ url: h.url } satisfies Reply);
} else {
  const arg = (name: string, fallback: number) => {
    const at = process.argv.indexOf(name);
    return at === -1 ? fallback : Number(process.argv[at + 1]);
  };
  const posts = arg("--posts", 30);
  const mib = arg("--mib", 19);
  const child = fork(
    fileURLToPath(new URL("../bin/run-ts.mjs", import.meta.url)),
    [fileURLToPath(import.meta.url), "--child"],
    {
      execArgv: ["--expose-gc"],
    },
  );
  const next = () => new Promise<Reply>((resolve) => child.once("message", (m) => resolve(m as Reply)));
  const { url } = await next();
  const rss = async () => {
    const reply = next();
    child.send("rss");
    return (await reply).rss! / 1_048_576;
  };
  const before = await rss();
  const piece = Buffer.alloc(1_048_576, "x");
  for (let i = 0; i < posts; i++) {
    await new Promise<void>((resolve) => {
      const req = request(`${url}/v2/nowhere/job-done/w1/j${i}`, {
        method: "POST",
        headers: { "content-type": "text/plain", "content-length": String(mib * 1_048_576) },
      });
      req.on("response", (res) => {
        res.resume();
        res.on("end", resolve);
      });
      // The harness may cut the upload once it has answered: that ends this post too.
      req.on("error", () => resolve());
      let sent = 0;
      const pump = () => {
        while (sent < mib) {
          sent++;
          if (!req.write(piece)) return void req.once("drain", pump);
        }
        req.end();
      };
      pump();
    });
  }
  const after = await rss();
  child.send("close");
  console.log(
    `${posts} unauthenticated posts of ${mib} MiB: harness RSS ${before.toFixed(1)} MiB before, ${after.toFixed(1)} MiB after (${(after - before).toFixed(1)} MiB change)`,
  );
}
