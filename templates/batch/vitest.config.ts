import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // runlet ships TypeScript sources; let vitest compile them instead of handing them to Node.
    server: { deps: { inline: ["runlet"] } },
  },
});
