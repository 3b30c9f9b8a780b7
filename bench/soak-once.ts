import { measureSoak } from "./figures/soak.js";
import { FULL_OPTIONS, QUICK_OPTIONS } from "./options.js";

/**
 * Runs the real-time soak alone and prints its figures (`npm run bench` runs it with the rest):
 * `node bin/run-ts.mjs bench/soak-once.ts [--quick]`.
 */
const quick = process.argv.includes("--quick");
for (const f of await measureSoak(quick ? QUICK_OPTIONS : FULL_OPTIONS)) {
  console.log(`${f.label}: ${f.median} ${f.unit}${f.note === undefined ? "" : ` (${f.note})`}`);
}
