/**
 * Names of the metric series the dashboard reads from the store (src/store/metrics.ts). This is the
 * contract with the training side: it records these series, the dashboard shows them. `peer` ''
 * is this node; other peers' values (e.g. gathered by a coordinator) carry their peer id.
 */
export const METRIC = {
  /** Swarm loss after each optimizer step (the point's epoch is the step). */
  loss: 'loss',
  /** This node's throughput in samples/s. */
  samplesPerSecond: 'samples_per_second',
  /** The swarm's estimated throughput in samples/s. */
  swarmSamplesPerSecond: 'swarm_samples_per_second',
  peersAlive: 'peers_alive',
  /** The swarm's current epoch (optimizer steps taken). */
  epoch: 'epoch',
  /** Samples the swarm has accumulated toward the next step. */
  samplesAccumulated: 'samples_accumulated',
  targetBatchSize: 'target_batch_size',
  /** Estimated seconds until the swarm reaches the target batch size. */
  etaSeconds: 'eta_seconds',
  /** Cumulative samples contributed to the run, per peer. */
  samples: 'samples',
  /** Cumulative seconds of compute contributed, per peer. */
  computeSeconds: 'compute_seconds',
  /** Micro-batches this node skipped because their loss or gradient was not finite (cumulative). */
  badMicroBatches: 'bad_micro_batches',
  /** Times this node's parameters became non-finite and it restored its in-memory backup (cumulative). */
  backupsRestored: 'backups_restored',
  /** Seconds this node's main thread was busy during its latest all-reduce (gradients or state): the averaging's CPU cost. */
  averagingBusySeconds: 'averaging_busy_seconds',
  /** Bytes of the vector that all-reduce averaged. */
  averagingBytes: 'averaging_bytes',
  /** That all-reduce's main-thread busy seconds per GB averaged. */
  averagingBusySecondsPerGb: 'averaging_busy_seconds_per_gb',
  /** Bytes this node sent in every all-reduce of an epoch (both phases of a PowerSGD round, state averaging), at its step (the point's epoch). */
  averagingBytesSent: 'averaging_bytes_sent',
  /** That epoch's compression (epochCompression in src/training/sink.ts), when it averaged anything. */
  averagingCompression: 'averaging_compression',
  /** The run's averaging mode, with each epoch's bytes sent: its index in AVERAGING_MODES (0 plain, 1 PowerSGD, 2 DiLoCo). */
  averagingMode: 'averaging_mode',
} as const;
