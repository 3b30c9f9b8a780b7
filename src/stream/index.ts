/** Streaming: yielded values to ≤ 1 MiB chunks with metrics, and back (docs/streaming.md). */
export { StreamCoalescer, type StreamCoalescerOptions } from "./coalesce.js";
export { createReassembler, type Reassembler, reassemble } from "./reassemble.js";
export {
  chunkBody,
  chunkJson,
  type ExtraMetrics,
  RUNLET_METRIC_KEYS,
  type StreamEncoding,
  splitItem,
  splitItemIter,
} from "./split.js";
