/** What a run measures (the `raw` block of the results file), and the context the phases share. */
import type { HttpsJsonClient } from '../../lib/dist/index.js';
import type { PeerKind } from '../../watch-peers/dist/index.js';
import type { BenchApi, BenchServer } from './cluster.js';
import type { Config, Fault } from './config.js';
import type { MemoryFigures } from './ipc.js';

/** One peer in one freshness trial. */
export interface PeerTrialResult {
  /** From sending the edit to the cache holding it; null: not seen within the cap. */
  seenMs: number | null;
  waitedMs: number;
  /** Lifecycle lines logged after the fault, seconds from the edit. */
  events: Array<{ atSec: number; msg: string }>;
  kfcEventCounts?: Record<string, number>;
}

/** One freshness trial. */
export interface TrialRecord {
  trial: number;
  peers: PeerKind[];
  fault: Fault;
  syncMs?: number;
  faultDelayMs?: number;
  connectionsBefore?: number;
  frozenStreams?: number;
  blackholedConnections?: number;
  freezeToEditMs?: number;
  editLatencyMs?: number;
  waitedMs?: number;
  connectionsAtEnd?: number;
  results?: Partial<Record<PeerKind, PeerTrialResult>>;
}

/** Events/s of one peer. */
export interface ThroughputResult {
  updatesSent: number;
  received: number;
  writerSec: number;
  writerOpsPerSec: number;
  spanSec: number;
  eventsPerSec: number;
  lagAfterWriterMs: number;
  cpuSec: number;
  /** The median over the rounds (each round's in `cpuUsPerEventRounds`, in round order). */
  cpuUsPerEvent: number;
  cpuUsPerEventRounds?: number[];
}

/** Heap of one peer's cache. */
export interface MemoryResult {
  objects: number;
  heapUsedDeltaMb: number;
  heapMbPer10k: number;
  rssDeltaMb: number;
  externalDeltaMb: number;
  listedMs: number;
  syncedMs: number;
  base: MemoryFigures;
  after: MemoryFigures;
}

/** Everything a run measured. */
export interface Raw {
  trials: TrialRecord[];
  throughput: Partial<Record<PeerKind, ThroughputResult>>;
  memory: Partial<Record<PeerKind, MemoryResult>>;
  memoryDataset?: { objects: number; createSec: number; listJsonBytesPerObject: number };
}

/** What every phase works with. */
export interface Bench {
  cfg: Config;
  /** The server the peers watch (kubeconfig for the children; the bench's own writes go through `http`). */
  srv: BenchServer;
  http: HttpsJsonClient;
  api: BenchApi;
  /** The server's port (its fault relay's). */
  relayPort: number;
  /** The environment of the peer children (KUBECONFIG set). */
  childEnv: NodeJS.ProcessEnv;
  failures: string[];
  raw: Raw;
}
