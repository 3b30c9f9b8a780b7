export { createLogger, type Logger, type LoggerOptions, redactSecrets } from "./logger.js";
export { jobSecrets, logSecrets, REDACTED, redactText, textScrubber } from "./redact-text.js";
