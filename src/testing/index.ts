/** `runlet/testing`: a harness with in-process workers and a client, for vitest (docs/harness.md). */
export { ManualClock } from "../harness/index.js";
export {
  type CreateHarnessOptions,
  createHarness,
  type TestEndpoint,
  type TestHarness,
} from "./create-harness.js";
