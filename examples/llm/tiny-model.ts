// The llm starter is the source (templates/llm/src/tiny-model.ts): the example runs it as it ships.
export { type TinyModelOptions, tinyLlamaGguf, writeTinyModel } from "../../templates/llm/src/tiny-model.js";
