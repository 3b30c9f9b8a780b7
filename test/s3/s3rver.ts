// s3rver's helper lives in test/support/s3rver.ts; this path stays for the bench (bench/figures/s3.ts)
// and for imports written before the move.
export * from "../support/s3rver.js";
