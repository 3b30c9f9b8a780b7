import { RunletError, type RunletErrorCode } from "./errors.js";

/**
 * The one way runlet writes a state machine (docs/architecture.md, "One way to write a state
 * machine"): a table of the moves each state allows — a `Record` over the state union, so a state
 * without its row does not compile — and one place the state changes. A job the worker runs
 * (ActiveJob), a batch's member, the worker's lifecycle and an isolation thread's slot each hold
 * one; the harness's JobEntry keeps the same shape.
 *
 * Two kinds of move: {@link StateMachine.move} is a question ("go there if the table allows"),
 * false when it does not, for a move that may lose a race (a deadline and a result arriving
 * together); {@link StateMachine.to} is an order, and a move the table refuses throws a
 * RunletError with the machine's code (a runlet bug, as the harness's `RUNLET_HARNESS_JOB_STATE`).
 */

/** The moves each state allows; `[]` for an end state. */
export type Transitions<S extends string> = { readonly [K in S]: readonly S[] };

/** What a machine calls on each move it makes (its owner's "entering" work, or a log). */
export type OnMove<S extends string> = (from: S, to: S) => void;

/** A state, its table and the one function that moves it. */
export class StateMachine<S extends string> {
  readonly #what: string;
  readonly #table: Transitions<S>;
  readonly #code: RunletErrorCode;
  readonly #onMove: OnMove<S> | undefined;
  #state: S;

  /**
   * `what` names the machine in a refused move's message ("job abc", "the worker"); `code` is
   * the refused move's error code.
   */
  constructor(what: string, table: Transitions<S>, initial: S, code: RunletErrorCode, onMove?: OnMove<S>) {
    this.#what = what;
    this.#table = table;
    this.#state = initial;
    this.#code = code;
    this.#onMove = onMove;
  }

  get state(): S {
    return this.#state;
  }

  /** True when the machine is in one of `states`. */
  is(...states: readonly S[]): boolean {
    return states.includes(this.#state);
  }

  /** True when the table allows a move from the current state to `to`. */
  can(to: S): boolean {
    return this.#table[this.#state].includes(to);
  }

  /** Moves to `to` when the table allows it; false, and nothing changes, when it does not. */
  move(to: S): boolean {
    if (!this.can(to)) return false;
    const from = this.#state;
    this.#state = to;
    this.#onMove?.(from, to);
    return true;
  }

  /** Moves to `to`; a move the table refuses throws (the machine's code): a bug in its owner. */
  to(to: S): void {
    if (this.move(to)) return;
    throw new RunletError(this.#code, `${this.#what} cannot go from ${this.#state} to ${to} (a runlet bug)`, {
      details: { from: this.#state, to },
    });
  }
}
