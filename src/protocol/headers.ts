/**
 * Headers that label a result or stream post (docs/protocol.md, "Results"). The body is JSON text, but the
 * reference worker labels it form-urlencoded, with a header literally named `charset`, and that label
 * is what production has accepted for years; runlet sends the same so the platform sees nothing new.
 */
export const RESULT_POST_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-type": "application/x-www-form-urlencoded",
  charset: "utf-8",
});
