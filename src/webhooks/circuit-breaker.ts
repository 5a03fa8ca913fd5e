/**
 * A circuit breaker per webhook endpoint, in the memory of one sender process. An endpoint that gives no
 * answer (a timeout, a refused or reset connection) `threshold` times in a row is left alone for a
 * cool-down: its due deliveries stay pending, untouched (no try is spent, nothing is dropped), while
 * every other endpoint is served. After the cool-down one delivery goes as a probe: an answer (any HTTP
 * status: the receiver is there) closes the circuit; no answer opens it again for twice as long, up to
 * `maxMs`. From its first unanswered try until an answer, an endpoint gets one try at a time (not its
 * usual few): otherwise a retry could start while another try to the silent endpoint is still waiting
 * for its timeout, and be spent on it before the circuit opens. A receiver that answers with an error status is not cut off: it answers at once and holds no
 * slot for long; its deliveries follow their own retry schedule.
 */

export interface BreakerTuning {
  /** Unanswered tries in a row that open the circuit. */
  threshold: number;
  /** The first cool-down. */
  baseMs: number;
  /** The longest cool-down. */
  maxMs: number;
}

export const DEFAULT_BREAKER: BreakerTuning = { threshold: 3, baseMs: 10_000, maxMs: 300_000 };

interface State {
  failures: number;
  /** While open: until when. */
  openUntil: number;
  /** The cool-down the next opening gets. */
  nextCoolDownMs: number;
}

export class EndpointBreakers {
  readonly #tuning: BreakerTuning;
  readonly #states = new Map<string, State>();

  constructor(tuning: Partial<BreakerTuning> = {}) {
    this.#tuning = { ...DEFAULT_BREAKER, ...tuning };
  }

  /** The endpoint answered (whatever the status). */
  answered(endpointId: string): void {
    this.#states.delete(endpointId);
  }

  /** The endpoint gave no answer. */
  unanswered(endpointId: string, now: number): void {
    const state = this.#states.get(endpointId) ?? { failures: 0, openUntil: 0, nextCoolDownMs: this.#tuning.baseMs };
    state.failures++;
    if (state.failures >= this.#tuning.threshold) {
      state.openUntil = now + state.nextCoolDownMs;
      state.nextCoolDownMs = Math.min(this.#tuning.maxMs, state.nextCoolDownMs * 2);
    }
    this.#states.set(endpointId, state);
  }

  /** Open now: none of its deliveries may be tried. */
  isOpen(endpointId: string, now: number): boolean {
    const state = this.#states.get(endpointId);
    return state !== undefined && now < state.openUntil;
  }

  /** Endpoints open now. */
  open(now: number): string[] {
    const ids: string[] = [];
    for (const [id, state] of this.#states) if (now < state.openUntil) ids.push(id);
    return ids;
  }

  /** Endpoints that failed to answer and have not answered since (closed, or past a cool-down): one try at a time. */
  oneAtATime(now: number): string[] {
    const ids: string[] = [];
    for (const [id, state] of this.#states) if (state.failures > 0 && now >= state.openUntil) ids.push(id);
    return ids;
  }
}
