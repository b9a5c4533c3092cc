/**
 * What serves DNS and can be stopped: a forwarder, or a pool of forwarders in worker threads.
 * The shells (Corefile mode, node-local mode, main) start one or the other alike.
 */
/** Where a started forwarder listens (port 0 in tests picks free ones). */
export interface ForwarderStarted {
  port: number;
  addresses: string[];
  /** 0 when another serves /metrics (a worker's). */
  metricsPort: number;
  /** Node-local mode's NOTIFY port (-notify-listen-address), if any. */
  notifyPort?: number;
}

export interface Serving {
  start(): Promise<ForwarderStarted>;
  /** Lameduck (still answering), then drain: every query in flight is answered before the sockets close. */
  shutdown(): Promise<void>;
}
