import { type FSWatcher, readdirSync, watch } from "node:fs";
import { join } from "node:path";

/** Path segments whose changes never reload workers (dependencies, build output, VCS, editors). */
const IGNORED_SEGMENTS = new Set(["node_modules", "dist", "coverage"]);

/**
 * File names editors write beside the file they save, never a source: vim's write test `4913` and
 * its swap files (`.swp`, `.swo`, ...; `.name.swp` is a dot file anyway), emacs's `#name#`
 * autosave, JetBrains' safe-write `___jb_tmp___` / `___jb_old___`, kate's `.kate-swp`, Chrome's
 * `.crswap`, a `.tmp` and a `~` backup. A reload line named them (issue 54, item 7).
 */
const EDITOR_TEMPORARY = /^4913$|^#.*#$|\.sw[a-p]x?$|___jb_(?:tmp|old)___$|\.kate-swp$|\.crswap$|\.tmp$|~$/;

function ignored(relPath: string): boolean {
  const parts = relPath.split(/[\\/]/);
  const name = parts[parts.length - 1] ?? "";
  return (
    parts.some((p) => IGNORED_SEGMENTS.has(p) || (p.startsWith(".") && p.length > 1)) ||
    EDITOR_TEMPORARY.test(name)
  );
}

/**
 * Watches `dir` and every sub-folder except ignored ones (node_modules, dist, coverage, dot
 * folders) and calls `onChange` with the changed files once changes have been quiet for
 * `debounceMs` (an editor's save is often several events). Ignored folders are never watched at
 * all: a recursive watch of a project root would otherwise put a watch on every folder of
 * node_modules. Sub-folders created later are not watched. Returns a closer.
 */
export function watchFolder(
  dir: string,
  onChange: (files: string[]) => void,
  debounceMs = 200,
): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  const changed = new Set<string>();
  const watchers: FSWatcher[] = [];
  const listen = (path: string, prefix: string, recursive: boolean) => {
    const watcher = watch(path, { recursive }, (_event, filename) => {
      const rel = filename === null ? "" : `${prefix}${filename.toString()}`;
      if (rel === prefix || ignored(rel)) return;
      changed.add(rel);
      clearTimeout(timer);
      timer = setTimeout(() => {
        const files = [...changed].sort();
        changed.clear();
        onChange(files);
      }, debounceMs);
    });
    // A watch error (a folder removed) must not crash dev; the workers keep running as they are.
    watcher.on("error", () => watcher.close());
    watchers.push(watcher);
  };
  listen(dir, "", false);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory() && !ignored(entry.name)) listen(join(dir, entry.name), `${entry.name}/`, true);
  }
  return {
    close() {
      clearTimeout(timer);
      for (const w of watchers) w.close();
    },
  };
}
