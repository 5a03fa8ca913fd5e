/** Terminal feedback on stderr: redrawn in place on a TTY, silent otherwise (logs and pipes stay clean). */

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

const isTty = (): boolean => process.stderr.isTTY === true;

function draw(line: string): void {
  const width = process.stderr.columns || 100;
  process.stderr.write(`\r\x1b[2K${line.slice(0, width - 1)}`);
}

function clear(): void {
  process.stderr.write('\r\x1b[2K');
}

export interface Spinner {
  update(text: string): void;
  stop(): void;
}

/** A spinner with a text and the time elapsed; does nothing when stderr is not a terminal. */
export function startSpinner(text: string): Spinner {
  if (!isTty()) return { update: () => undefined, stop: () => undefined };
  const started = Date.now();
  let frame = 0;
  let current = text;
  const render = (): void => draw(`${FRAMES[frame++ % FRAMES.length]} ${current} (${Math.round((Date.now() - started) / 1000)}s)`);
  render();
  const timer = setInterval(render, 100);
  return {
    update(next) {
      current = next;
      render();
    },
    stop() {
      clearInterval(timer);
      clear();
    },
  };
}

export interface ProgressCounts {
  done: number;
  failed: number;
  total: number;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** "[#####-----] 40/100  done 38  failed 2  remaining 60  12.3/s  ~5s left" */
export function formatProgress(counts: ProgressCounts, elapsedMs: number, note = ''): string {
  const finished = counts.done + counts.failed;
  const remaining = counts.total - finished;
  const width = 24;
  const filled = counts.total === 0 ? width : Math.round((finished / counts.total) * width);
  const rate = elapsedMs > 0 ? finished / (elapsedMs / 1000) : 0;
  const left = rate > 0 ? formatDuration(remaining / rate) : '?';
  return (
    `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${finished}/${counts.total}` +
    `  done ${counts.done}  failed ${counts.failed}  remaining ${remaining}  ${rate.toFixed(1)}/s  ~${left} left${note ? `  ${note}` : ''}`
  );
}

export interface ProgressBar {
  update(counts: ProgressCounts, note?: string): void;
  stop(): void;
}

export function startProgressBar(): ProgressBar {
  if (!isTty()) return { update: () => undefined, stop: () => undefined };
  const started = Date.now();
  let last: { counts: ProgressCounts; note: string } | undefined;
  const render = (): void => {
    if (last) draw(formatProgress(last.counts, Date.now() - started, last.note));
  };
  const timer = setInterval(render, 250);
  return {
    update(counts, note = '') {
      last = { counts: { ...counts }, note };
      render();
    },
    stop() {
      clearInterval(timer);
      clear();
    },
  };
}
