import { describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { StateMachine, type Transitions } from "../../src/state-machine.js";

type Light = "red" | "green" | "off";
const TABLE: Transitions<Light> = { red: ["green", "off"], green: ["red", "off"], off: [] };

describe("StateMachine: one table, one place the state changes", () => {
  it("moves only where the table allows; move() answers false and changes nothing otherwise", () => {
    const moves: string[] = [];
    const light = new StateMachine("the light", TABLE, "red", "RUNLET_WORKER_STATE", (from, to) =>
      moves.push(`${from}→${to}`),
    );
    expect(light.move("green")).toBe(true);
    expect(light.move("green")).toBe(false);
    expect(light.move("off")).toBe(true);
    expect(light.move("red")).toBe(false);
    expect(light.state).toBe("off");
    expect(light.is("off", "red")).toBe(true);
    expect(moves).toEqual(["red→green", "green→off"]);
  });

  it("to() throws a refused move with the machine's code, naming it and both states", () => {
    const light = new StateMachine("the light", TABLE, "off", "RUNLET_WORKER_STATE");
    let thrown: unknown;
    try {
      light.to("green");
    } catch (err) {
      thrown = err;
    }
    expect(isRunletError(thrown) && thrown.code).toBe("RUNLET_WORKER_STATE");
    expect((thrown as Error).message).toBe("the light cannot go from off to green (a runlet bug)");
    expect(light.state).toBe("off");
  });
});
