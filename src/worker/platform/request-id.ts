/**
 * The `X-Request-ID` header of a request about a job (docs/protocol.md, "Results"). A header value
 * can carry only visible Latin-1 text, spaces and tabs: an id with a line break or a character
 * beyond Latin-1 (`日本`) would make the HTTP client refuse the request before sending it, so such
 * an id is sent percent-encoded (as `encodeURIComponent` writes it) and every other id as it is.
 */

/** Characters a header value may hold (RFC 9110 field-vchar, obs-text, SP and HTAB), none leading or trailing whitespace. */
const HEADER_SAFE = /^(?![ \t])[\t\x20-\x7e\x80-\xff]*(?<![ \t])$/;

/** The job id as an `X-Request-ID` value. */
export function requestIdHeader(jobId: string): string {
  return HEADER_SAFE.test(jobId) ? jobId : encodeURIComponent(jobId);
}
