// The ocr starter is the source (templates/ocr/src/handler.ts): the example runs it as it ships.
export { default } from "../../templates/ocr/src/handler.js";
