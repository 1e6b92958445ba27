// Polling that never overlaps itself: the next call is scheduled only when the last one has
// answered, so a slow API is not flooded, and a view that is left stops it for good.

export class Poller {
  /** fn() is awaited each round; it returns false to stop (e.g. the job has finished).
   * onError(error) returns false to stop too (e.g. the job does not exist). */
  constructor(fn, intervalMs, onError = () => {}) {
    this.fn = fn;
    this.intervalMs = intervalMs;
    this.onError = onError;
    this.timer = null;
    this.stopped = true;
  }

  start() {
    this.stopped = false;
    this.tick();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  async tick() {
    if (this.stopped) return;
    let again = true;
    try {
      again = (await this.fn()) !== false;
    } catch (error) {
      again = this.onError(error) !== false;
    }
    if (again && !this.stopped) this.timer = setTimeout(() => this.tick(), this.intervalMs);
  }
}
