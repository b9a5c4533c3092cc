import { latin1Of } from '@cluster-dns/wire';

const NEWLINE = 0x0a;
const RETURN = 0x0d;

/**
 * A watch response's body (one JSON event per line) cut into lines as its chunks arrive, each line
 * as latin1 text (one character per octet, as list-stream.ts reads a list, for the same reasons).
 * client-node's Watch ran the bytes through a web-to-Node stream adapter, a UTF-8 decoder and
 * readline's line regex before JSON.parse: at 700 EndpointSlice events/s those were a tenth of the
 * API worker's CPU. A line cut by a chunk boundary is carried over; blank lines are skipped.
 */
export class WatchLines {
  private head = '';

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Uint8Array): void {
    let from = 0;
    for (;;) {
      const end = chunk.indexOf(NEWLINE, from);
      if (end === -1) break;
      let line = latin1Of(chunk, from, end);
      if (this.head !== '') {
        line = this.head + line;
        this.head = '';
      }
      this.emit(line);
      from = end + 1;
    }
    if (from < chunk.length) this.head += latin1Of(chunk, from, chunk.length);
  }

  /** The body ended: a last line without its newline is still a line. */
  end(): void {
    const last = this.head;
    this.head = '';
    this.emit(last);
  }

  private emit(line: string): void {
    const text = line.charCodeAt(line.length - 1) === RETURN ? line.slice(0, -1) : line;
    if (text.trim() !== '') this.onLine(text);
  }
}
