import type { Clock } from "../../clock.js";
import { addRecent } from "../../recent-set.js";
import { KeyedWaiters } from "../../wait.js";

/** Per-endpoint settings the store needs. */
export interface StoreEndpoint {
  /** Execution timeout when a job carries no `policy.executionTimeout`, ms. */
  readonly executionTimeoutMs: number;
}

/**
 * Retired workers an endpoint remembers, at most: the oldest is forgotten past it. A worker's id
 * (its pod id) is fresh for each process, and a retired one is told to stop right after, so only
 * a worker still taking after this many later retirements could be handed a job again.
 */
export const MAX_RETIRED_WORKERS = 1_000;

/** A held job-take: its worker, how many it takes, and what was handed to it (set by the queue). */
interface Taker<T> {
  readonly workerId: string;
  readonly max: number;
  handed: T[] | undefined;
}

/**
 * One endpoint's waiting jobs (ids, oldest first) and the job-take polls held open for them.
 * Handing out goes through `onHand`, which the store uses to start the jobs: it returns what goes
 * to the worker (each job written as JSON), leaving out a job it could not hand out; a poll that
 * got nothing from the ids taken takes the next ones.
 */
export class EndpointQueue<T = string> {
  /** Its settings now (changed by `JobStore.updateExecutionTimeout`). */
  settings: StoreEndpoint;
  /** Jobs that reached COMPLETED since start. */
  completed = 0;
  /** Jobs that reached FAILED or TIMED_OUT since start. */
  failed = 0;
  /** Client retries and heartbeat requeues since start. */
  retried = 0;
  #ids: string[] = [];
  /** Workers retired ({@link retire}), oldest first: each take of theirs gets nothing. */
  readonly #retired = new Set<string>();
  /** Held polls, oldest first; each waits on {@link #holds} under its own key. */
  readonly #takers: Taker<T>[] = [];
  readonly #holds: KeyedWaiters<Taker<T>>;
  readonly #onHand: (ids: readonly string[], workerId: string) => T[];

  /** @param holdClock times held polls (real time in the harness: a worker holds a connection). */
  constructor(
    settings: StoreEndpoint,
    onHand: (ids: readonly string[], workerId: string) => T[],
    holdClock?: Clock,
  ) {
    this.settings = settings;
    this.#onHand = onHand;
    this.#holds = new KeyedWaiters(holdClock);
  }

  /** Waiting job ids, oldest first. */
  get ids(): readonly string[] {
    return this.#ids;
  }

  /** How many job-take polls are held. */
  get waitingTakes(): number {
    return this.#holds.size;
  }

  /** Adds a job at the back and offers it to held polls. */
  push(id: string): void {
    this.#ids.push(id);
    this.#dispatch();
  }

  /** Puts jobs back at the front, in order (a hand-out the worker never received), and offers them again. */
  unshift(ids: readonly string[]): void {
    this.#ids.unshift(...ids);
    this.#dispatch();
  }

  /** Removes one waiting job; true when it was waiting. */
  remove(id: string): boolean {
    const before = this.#ids.length;
    this.#ids = this.#ids.filter((x) => x !== id);
    return this.#ids.length !== before;
  }

  /** Removes every waiting job and returns their ids. */
  drain(): string[] {
    return this.#ids.splice(0);
  }

  /**
   * A job-take: up to `max` waiting jobs at once, else the first to arrive within `holdMs` (real
   * time), else none. Aborting `signal` (the worker hung up) withdraws the poll before anything is
   * handed to it. A retired worker's take gets nothing, at once.
   */
  async take(workerId: string, max: number, holdMs: number, signal: AbortSignal): Promise<T[]> {
    if (this.#retired.has(workerId)) return [];
    const now = this.#hand(workerId, max);
    if (now.length > 0) return now;
    const taker: Taker<T> = { workerId, max, handed: undefined };
    this.#takers.push(taker);
    await this.#holds.wait(taker, holdMs, signal);
    // Handed jobs are the poll's whatever ended its wait: the queue hands out only to pending polls.
    const at = this.#takers.indexOf(taker);
    if (at >= 0) this.#takers.splice(at, 1);
    return taker.handed ?? [];
  }

  /** Answers every held poll with nothing (on close). */
  releaseTakers(): void {
    for (const taker of this.#takers.splice(0)) this.#holds.wake(taker);
  }

  /** Answers the held polls of one worker with nothing (it lapsed: nothing may be handed to it). */
  releaseTakersOf(workerId: string): void {
    for (const taker of this.#takers.filter((t) => t.workerId === workerId)) {
      this.#takers.splice(this.#takers.indexOf(taker), 1);
      this.#holds.wake(taker);
    }
  }

  /**
   * Hands no more jobs to a worker that is being stopped: its held polls are answered with nothing
   * now, and every later take of it gets nothing at once. Jobs already handed to it stay its own.
   */
  retire(workerId: string): void {
    addRecent(this.#retired, workerId, MAX_RETIRED_WORKERS);
    this.releaseTakersOf(workerId);
  }

  /** Whether {@link retire} has retired the worker (and it is still remembered). */
  isRetired(workerId: string): boolean {
    return this.#retired.has(workerId);
  }

  #dispatch(): void {
    while (this.#ids.length > 0 && this.#takers.length > 0) {
      const taker = this.#takers[0]!;
      // A poll whose wait already ended (timed out, or its worker hung up) gets nothing more.
      if (!this.#holds.has(taker)) {
        this.#takers.shift();
        continue;
      }
      const handed = this.#hand(taker.workerId, taker.max);
      // Nothing could be handed out and the queue is empty now: the poll goes on waiting.
      if (handed.length === 0) return;
      this.#takers.shift();
      taker.handed = handed;
      this.#holds.wake(taker);
    }
  }

  /** Up to `max` jobs for `workerId`, leaving out those that could not be handed out; [] when none. */
  #hand(workerId: string, max: number): T[] {
    while (this.#ids.length > 0) {
      const handed = this.#onHand(this.#ids.splice(0, Math.max(1, max)), workerId);
      if (handed.length > 0) return handed;
    }
    return [];
  }
}
