export { createLogger, type Logger, type LoggerOptions, redactSecrets } from "./logger.js";
